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
  /**
   * Inner products of `query` with the rows at `positions` (NaN for -1). This and `rerank`, `read`,
   * `exactSearch` throw an error with code SNAPSHOT_ROW_NOT_AUTHENTIC for a sealed row that does not
   * authenticate.
   */
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
  /** The base is a sealed rows file (each row decrypted when read). */
  sealed(): boolean;
  /**
   * Decrypts every sealed base row once on up to 4 threads (nothing kept): the first row that does
   * not authenticate, or -1. `background`: those threads at the lowest CPU priority (nice 19), for a
   * check that runs while the store serves.
   */
  verify(background?: boolean): Promise<number>;
  overlayBytes(): number;
  close(): void;
  /** Exact top-k by inner product over every row (benchmarks' reference). */
  exactSearch(queries: Float32Array, k: number): { labels: Int32Array; scores: Float32Array };
}

/** A sealed base file: the snapshot's row key, the rows' associated-data prefix, their user ids (16 bytes each). */
export interface SealedBase {
  key: Uint8Array;
  associatedData: Uint8Array;
  ids: Uint8Array;
  headerBytes: number;
}

interface Addon {
  SketchIndex: new (d: number, nbits: number, seed: number) => SketchIndexNative;
  VectorStore: new (d: number, basePath: string | null, baseRows: number, sealed?: SealedBase) => VectorStoreNative;
  sealRows(key: Uint8Array, associatedData: Uint8Array, firstRow: number, ids: Uint8Array, vectors: Float32Array, d: number): Uint8Array;
  openRow(key: Uint8Array, associatedData: Uint8Array, record: Uint8Array, d: number): Float32Array | null;
  sealedRowOverhead: number;
  projectBindingVersion?: number;
  fastIsa: boolean;
  scanIsa: string;
}

const require = createRequire(import.meta.url);
const root = path.dirname(require.resolve('faiss-node/package.json'));
require('faiss-node'); // same addon; loads (and fails clearly) the usual way first
const addon = require(path.join(root, 'build', 'Release', 'faiss-node.node')) as Addon;
if (addon.projectBindingVersion !== 8 || !addon.SketchIndex || !addon.sealRows) {
  throw new Error("the faiss-node addon lacks the project's SketchIndex/VectorStore: run `FAISS_FORCE_BUILD=1 npm run setup`");
}

export const SketchIndex = addon.SketchIndex;
export const VectorStore = addon.VectorStore;
/** Rows sealed as a VectorStore reads them (sealed-rows-file.ts): records of rows firstRow.. of users `ids`. */
export const sealRows = addon.sealRows;
/** One record opened natively with the whole associated data (tests), or null when it does not authenticate. */
export const openRow = addon.openRow;
/** Nonce and tag bytes per sealed row. */
export const sealedRowOverhead = addon.sealedRowOverhead;
/** The error code of a sealed row that does not authenticate. */
export const ROW_NOT_AUTHENTIC = 'SNAPSHOT_ROW_NOT_AUTHENTIC';
/** POPCNT + AVX2 kernels in use (else the generic ones, several times slower). */
export const fastIsa = addon.fastIsa;
/** The Hamming scan kernel in use: `avx512-vpopcntdq`, `popcnt-avx2` or `generic`. */
export const scanIsa = addon.scanIsa;
