/**
 * Cosine similarity of two embeddings (in [-1, 1]). For the L2-normalised embeddings of the face
 * engine this equals their dot product; the norms are computed anyway so that the helper is also
 * right for vectors that are not normalised (or have lost precision in storage).
 */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new RangeError(`dimension mismatch: ${a.length} vs ${b.length}`);
  if (a.length === 0) throw new RangeError('empty vectors');
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  if (!(na > 0) || !(nb > 0)) throw new RangeError('zero vector');
  const c = dot / Math.sqrt(na * nb);
  if (!Number.isFinite(c)) throw new RangeError('non-finite similarity');
  return Math.max(-1, Math.min(1, c));
}
