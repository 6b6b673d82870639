/**
 * Face embeddings, for every process: their size, their storage format (512 float32, little-endian, in
 * a PostgreSQL bytea, SPEC 6: the API writes canonical embeddings, the search workers read them) and
 * the vector maths on them (unit length, dot product, cosine similarity), written once here.
 */
export const EMBEDDING_DIM = 512;
export const EMBEDDING_BYTES = EMBEDDING_DIM * 4;

/** Throws unless `v` holds exactly EMBEDDING_DIM finite numbers with a non-zero norm. */
export function assertEmbedding(v: ArrayLike<number>, what = 'embedding'): void {
  if (!v || typeof v.length !== 'number' || v.length !== EMBEDDING_DIM) {
    throw new RangeError(`${what} must have ${EMBEDDING_DIM} values, got ${v?.length}`);
  }
  let ss = 0;
  for (let i = 0; i < EMBEDDING_DIM; i++) {
    const x = v[i]!;
    if (typeof x !== 'number' || !Number.isFinite(x)) throw new RangeError(`${what} has a non-finite value at ${i}`);
    ss += x * x;
  }
  if (!(ss > 0)) throw new RangeError(`${what} is a zero vector`);
}

/**
 * A copy of `v` scaled to unit L2 norm, as float32 (inner product of two such vectors = cosine).
 * Throws on a zero or non-finite norm: such a vector has no direction to compare.
 */
export function normalised(v: ArrayLike<number>): Float32Array {
  let ss = 0;
  for (let i = 0; i < v.length; i++) ss += v[i]! * v[i]!;
  if (!(ss > 0) || !Number.isFinite(ss)) throw new RangeError('vector has a zero or non-finite norm');
  const inv = 1 / Math.sqrt(ss);
  const out = new Float32Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = v[i]! * inv;
  return out;
}

/** 512 numbers -> 2048 bytes (float32 little-endian). Validates first. */
export function encodeEmbedding(v: ArrayLike<number>): Buffer {
  assertEmbedding(v);
  const buf = Buffer.allocUnsafe(EMBEDDING_BYTES);
  for (let i = 0; i < EMBEDDING_DIM; i++) buf.writeFloatLE(v[i]!, i * 4);
  return buf;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** 2048 bytes (float32 little-endian) -> 512 floats. Throws on a wrong length. */
export function decodeEmbedding(buf: Uint8Array): Float32Array {
  if (buf.byteLength !== EMBEDDING_BYTES) throw new RangeError(`stored embedding has ${buf.byteLength} bytes, expected ${EMBEDDING_BYTES}`);
  if (LITTLE_ENDIAN) return new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + EMBEDDING_BYTES)); // one copy
  const out = new Float32Array(EMBEDDING_DIM);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let i = 0; i < EMBEDDING_DIM; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

/** Dot product (= cosine for unit vectors). */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/**
 * Cosine similarity of two embeddings (in [-1, 1]). For the L2-normalised embeddings of the face
 * engine this equals their dot product; the norms are computed anyway so that the helper is also
 * right for vectors that are not normalised (or have lost precision in storage).
 */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new RangeError(`dimension mismatch: ${a.length} vs ${b.length}`);
  if (a.length === 0) throw new RangeError('empty vectors');
  let dotProduct = 0,
    na = 0,
    nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!,
      y = b[i]!;
    dotProduct += x * y;
    na += x * x;
    nb += y * y;
  }
  if (!(na > 0) || !(nb > 0)) throw new RangeError('zero vector');
  const c = dotProduct / Math.sqrt(na * nb);
  if (!Number.isFinite(c)) throw new RangeError('non-finite similarity');
  return Math.max(-1, Math.min(1, c));
}
