/**
 * The project's own classes in the faiss-node addon (native/search-kernel/src/sketch.cc, built by
 * scripts/build-faiss.sh): typed arrays in and out, row positions as stable labels.
 */
import { createRequire } from 'node:module';
import path from 'node:path';

export interface SketchIndexNative {
  setMean(mean: Float32Array): void;
  getMean(): Float32Array;
  /** Codes (nbits/8 bytes per vector) of unit vectors, not added. */
  encode(vectors: Float32Array): Uint8Array;
  /** Appends codes; returns the first new row position. */
  addCodes(codes: Uint8Array): number;
  getCodes(from: number, count: number): Uint8Array;
  setDead(positions: Int32Array, dead: boolean): void;
  /**
   * The k live rows of smallest Hamming distance per query (labels -1 padded), best first. With
   * 0 < refine < k, only the best `refine` of those by the asymmetric estimate (float query against
   * the candidates' sign bits) are returned, in that order.
   */
  search(queries: Float32Array, k: number, refine?: number): { labels: Int32Array; distances: Int32Array };
  ntotal(): number;
  memoryBytes(): number;
  /** Queries scanned a second time because the sampled starting threshold was too tight. */
  rescans(): number;
}

export interface VectorStoreNative {
  append(vectors: Float32Array): number;
  /** An empty store takes these rows as its base, read in place (referenced, never copied). */
  adopt(vectors: Float32Array): void;
  /** Inner products of `query` with the rows at `positions` (NaN for -1). */
  scores(query: Float32Array, positions: Int32Array): Float32Array;
  /**
   * The exact re-rank of a batch: per query (nq = queries.length / d), the k best of its
   * positions.length / nq candidate rows by inner product, best first (ties: lower row first);
   * -1 candidates skipped, missing results -1 / NaN.
   */
  rerank(queries: Float32Array, positions: Int32Array, k: number): { labels: Int32Array; scores: Float32Array };
  read(from: number, count: number): Float32Array;
  rows(): number;
  baseRows(): number;
  /** The base file's pages were all mapped at open (small files; SKETCH_POPULATE overrides). */
  populated(): boolean;
  overlayBytes(): number;
  close(): void;
  /** Exact top-k by inner product over every row (benchmarks' reference). */
  exactSearch(queries: Float32Array, k: number): { labels: Int32Array; scores: Float32Array };
}

interface Addon {
  SketchIndex: new (d: number, nbits: number, seed: number) => SketchIndexNative;
  VectorStore: new (d: number, basePath: string | null, baseRows: number) => VectorStoreNative;
  projectBindingVersion?: number;
  fastIsa: boolean;
  scanIsa: string;
}

const require = createRequire(import.meta.url);
const root = path.dirname(require.resolve('faiss-node/package.json'));
require('faiss-node'); // same addon; loads (and fails clearly) the usual way first
const addon = require(path.join(root, 'build', 'Release', 'faiss-node.node')) as Addon;
if (addon.projectBindingVersion !== 4 || !addon.SketchIndex) {
  throw new Error("the faiss-node addon lacks the project's SketchIndex/VectorStore: run `FAISS_FORCE_BUILD=1 npm run setup`");
}

export const SketchIndex = addon.SketchIndex;
export const VectorStore = addon.VectorStore;
/** POPCNT + AVX2 kernels in use (else the generic ones, several times slower). */
export const fastIsa = addon.fastIsa;
/** The Hamming scan kernel in use: `avx512-vpopcntdq`, `popcnt-avx2` or `generic`. */
export const scanIsa = addon.scanIsa;
