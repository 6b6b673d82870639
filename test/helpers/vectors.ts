/** Deterministic synthetic vectors for the search tests (no face pipeline): a seeded generator and "a second photo" of a vector. */

/** mulberry32: a small seeded generator of uniform numbers in [0, 1), so every run sees the same data. */
export function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

/** The unit vector at cosine `c` with the unit vector `v`, turned towards `noise` (its part orthogonal to `v`). */
export function atCosine(v: number[], noise: number[], c: number): number[] {
  const d = noise.reduce((s, x, i) => s + x * v[i]!, 0);
  const orth = noise.map((x, i) => x - d * v[i]!);
  const on = Math.hypot(...orth);
  return v.map((x, i) => c * x + Math.sqrt(1 - c * c) * (orth[i]! / on));
}
