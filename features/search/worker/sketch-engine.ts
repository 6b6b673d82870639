/**
 * `BinarySketch<bits>`: the default index engine (docs/vector-index.md, chosen by measurement in
 * docs/performance.md).
 *
 * - In memory: one binary code per row, the signs of a FAISS random rotation of (x - mean) to `bits`
 *   dimensions (64 bytes per vector for BinarySketch512), plus the id maps.
 * - Search: an exhaustive Hamming scan of every live code (native, POPCNT/AVX2, dead rows skipped
 *   inside the scan; a batch of queries shares one pass), the best `candidates` rows go to an exact
 *   re-rank: inner products with the stored float32 vectors. Scores are therefore exact cosines, and
 *   the answer equals exact search whenever the true best rows are among the candidates.
 * - The float32 vectors live outside the JS heap: a snapshot's `vectors.sealed` (each row its own
 *   AES-256-GCM record under the key ring, bound to the snapshot, the row and the user:
 *   sealed-rows-file.ts) is memory-mapped by the native store, checked once at open (every row
 *   decrypted on several threads, nothing kept), and a search decrypts only the rows it re-ranks; rows
 *   appended since the snapshot are in memory (the "overlay"). Folding the overlay writes a new
 *   snapshot. The ids are a compact table (id-table.ts: 16 bytes per row).
 * - Training: the mean vector of a uniform sample (centring makes the sign bits balanced for
 *   real embeddings, whose mean is far from 0). It is retrained when the population has grown past
 *   `SEARCH_RETRAIN_GROWTH` times the population it was trained at (replica.ts does that in the
 *   background, through a snapshot).
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { EngineBuilder, EngineKind, EngineRow, FrozenEngine, IndexEngine, RebuildPolicy, RebuildReason, VectorHit } from './engine.js';
import { SnapshotFileError, type SnapshotReader, type SnapshotWriter } from './sealed-snapshot-files.js';
import { ROW_NOT_AUTHENTIC, SketchIndex, VectorStore, type SketchIndexNative, type VectorStoreNative } from './search-kernel.js';
import { IdTable, uuidBytes, uuidString } from './id-table.js';

export const SKETCH_FACTORY = /^BinarySketch(256|512|1024|2048)$/;
/** Below this many rows the mean is not estimated (codes of uncentred vectors work, a little worse). */
export const SKETCH_MIN_TRAIN = 1000;
const SAMPLE_SIZE = 50_000;
const ROTATION_SEED = 1_234_567;
const CHUNK = 4096;
/** The snapshot's files: the re-rank rows (sealed row by row, mapped), the codes and the ids (16 bytes per row). */
export const VECTORS_FILE = 'vectors.sealed';
const CODES_FILE = 'codes.bin';
const IDS_FILE = 'ids.bin';

/**
 * A sealed re-rank row that did not authenticate during a search (the snapshot file was altered after
 * it was opened): the search fails rather than use it, and the replica loads its index again.
 */
export class SnapshotRowsDamagedError extends Error {
  readonly code = ROW_NOT_AUTHENTIC;
}

export interface SketchOptions {
  dim: number;
  /** Candidates taken from the Hamming scan, per query. */
  candidates: number;
  /**
   * Of those, how many are re-ranked exactly (float32 reads): the best by the asymmetric estimate
   * (the float query against the candidates' sign bits). 0 or >= candidates: all of them.
   */
  exactCandidates?: number;
  /** Benchmarks only: see ReplicaOptions.clearVectorsFile. */
  clearVectorsFile?: string;
  /** When an opened snapshot's rows are authenticated (SEARCH_SNAPSHOT_CHECK; default `before-serving`). */
  snapshotCheck?: SnapshotCheck;
}

/** SEARCH_SNAPSHOT_CHECK: the whole rows file authenticated before the engine serves, or beside it. */
export type SnapshotCheck = 'background' | 'before-serving';

/** SEARCH_EXACT_CANDIDATES' default (docs/performance.md §2: recall vs exact 1.000 from 100 on both generators at 1M). */
export const DEFAULT_EXACT_CANDIDATES = 200;

interface SketchMeta {
  nbits: number;
  seed: number;
  dim: number;
  rows: number;
  trainedOn: number;
  trainedAtSize: number;
  mean: string; // base64 float32 LE
}

const clamp = (x: number) => Math.max(-1, Math.min(1, x));

/** Unit copies of the rows, concatenated. Throws on a zero or non-finite vector or a wrong length. */
function unitConcat(vectors: readonly ArrayLike<number>[], dim: number): Float32Array {
  const out = new Float32Array(vectors.length * dim);
  let o = 0;
  for (const v of vectors) {
    if (v.length !== dim) throw new RangeError(`vector of ${v.length} values for a ${dim}-d index`);
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += v[i]! * v[i]!;
    if (!(ss > 0) || !Number.isFinite(ss)) throw new RangeError('zero or non-finite vector');
    const s = 1 / Math.sqrt(ss);
    for (let i = 0; i < dim; i++) out[o++] = v[i]! * s;
  }
  return out;
}

function meanOf(rows: readonly ArrayLike<number>[], dim: number): Float32Array {
  const acc = new Float64Array(dim);
  for (const v of rows) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += v[i]! * v[i]!;
    const s = 1 / Math.sqrt(ss);
    for (let i = 0; i < dim; i++) acc[i]! += v[i]! * s;
  }
  const m = new Float32Array(dim);
  for (let i = 0; i < dim; i++) m[i] = rows.length ? acc[i]! / rows.length : 0;
  return m;
}

export class SketchEngine implements IndexEngine {
  readonly exact = true;
  readonly nprobe = null;
  private readonly ids: IdTable;
  private deadCount = 0;
  /** Rows that came from the snapshot this engine was opened from. */
  private readonly snapshotRows: number;
  /** See IndexEngine.rowsChecked: set by openSnapshot when the check runs beside the serving engine. */
  rowsChecked?: Promise<void>;

  constructor(
    readonly factory: string,
    readonly nbits: number,
    private readonly opts: SketchOptions,
    readonly sketch: SketchIndexNative,
    readonly store: VectorStoreNative,
    readonly trainedOn: number,
    readonly trainedAtSize: number,
    ids: IdTable = new IdTable(),
  ) {
    this.ids = ids;
    this.snapshotRows = ids.length;
    if (sketch.ntotal() !== ids.length || store.rows() !== ids.length)
      throw new Error(`sketch engine out of step: ${sketch.ntotal()} codes, ${store.rows()} vectors, ${ids.length} ids`);
  }

  get effectiveFactory(): string {
    return this.factory;
  }
  get size(): number {
    return this.ids.size;
  }
  get dead(): number {
    return this.deadCount;
  }
  get rows(): number {
    return this.ids.length;
  }
  /** Rows appended since the snapshot (held in memory). */
  get overlayRows(): number {
    return this.store.rows() - this.snapshotRows;
  }
  get candidates(): number {
    return this.opts.candidates;
  }

  has(userId: string): boolean {
    return this.ids.position(userId) >= 0;
  }

  userAt(pos: number): string | null {
    return this.ids.userAt(pos);
  }

  upsertMany(rows: readonly EngineRow[]): void {
    if (rows.length === 0) return;
    const seen = new Set<string>();
    const batch: EngineRow[] = [];
    for (let i = rows.length - 1; i >= 0; i--) {
      const r = rows[i]!;
      if (seen.has(r.userId)) continue;
      seen.add(r.userId);
      batch.push(r);
    }
    batch.reverse();
    for (const r of batch) uuidBytes(r.userId); // every id valid before anything changes
    const x = unitConcat(
      batch.map((r) => r.vector),
      this.opts.dim,
    );
    const codes = this.sketch.encode(x);
    const first = this.ids.length;
    if (this.sketch.ntotal() !== first || this.store.rows() !== first) throw new Error('sketch engine out of step with its id table');
    const old: number[] = [];
    for (const r of batch) {
      const p = this.ids.position(r.userId);
      if (p >= 0) old.push(p);
    }
    this.store.append(x);
    this.sketch.addCodes(codes);
    if (old.length) this.bury(old);
    for (const r of batch) this.ids.add(r.userId);
  }

  remove(userId: string): boolean {
    const p = this.ids.position(userId);
    if (p < 0) return false;
    this.bury([p]);
    return true;
  }

  private bury(positions: number[]): void {
    this.sketch.setDead(Int32Array.from(positions), true);
    for (const p of positions) if (this.ids.bury(p)) this.deadCount++;
  }

  searchMany(queries: readonly Float32Array[], k: number): VectorHit[][] {
    if (!Number.isInteger(k) || k < 1) throw new RangeError('k must be a positive integer');
    if (queries.length === 0) return [];
    const q = unitConcat(queries, this.opts.dim);
    if (this.size === 0) return queries.map(() => []);
    const kc = Math.min(this.size, Math.max(k, this.opts.candidates));
    // Hamming candidates of every query in one pass, the best `exactCandidates` of them by the
    // asymmetric estimate, then the exact re-rank (native: reads those rows with prefetching,
    // decrypting sealed ones, keeps the k best by exact score).
    const exactC = this.opts.exactCandidates ?? 0;
    const refine = exactC > 0 && exactC < kc ? Math.max(k, exactC) : 0;
    const { labels } = this.sketch.search(q, kc, refine);
    let best: { labels: Int32Array; scores: Float32Array };
    try {
      best = this.store.rerank(q, labels, k);
    } catch (e) {
      if ((e as { code?: string }).code === ROW_NOT_AUTHENTIC) throw new SnapshotRowsDamagedError((e as Error).message);
      throw e;
    }
    const out: VectorHit[][] = [];
    for (let qi = 0; qi < queries.length; qi++) {
      const hits: VectorHit[] = [];
      for (let j = qi * k; j < (qi + 1) * k; j++) {
        const p = best.labels[j]!;
        // Dead rows are skipped inside the scan; the id table is checked again (a tombstone is never returned).
        const userId = p >= 0 ? this.ids.userAt(p) : null;
        if (userId != null) hits.push({ userId, score: clamp(best.scores[j]!) });
      }
      out.push(hits);
    }
    return out;
  }

  memoryBytes(): number {
    // codes + dead flags (native), vectors appended since the snapshot, and the id table (the
    // snapshot's rows are mapped: the page cache's, not this process's).
    return this.sketch.memoryBytes() + this.store.overlayBytes() + this.ids.memoryBytes();
  }

  close(): void {
    this.store.close();
  }

  /** For snapshots: which of positions [0, rows) are live, captured now. */
  liveFlags(rows: number): Uint8Array {
    return this.ids.liveFlags(rows);
  }

  /** The 16 id bytes of position `p`. */
  idBytes(p: number): Uint8Array {
    return this.ids.idBytes(p);
  }
}

export class SketchKind implements EngineKind {
  readonly snapshots = true;
  readonly sampleSize = SAMPLE_SIZE;
  readonly nbits: number;
  /** Live ids of frozen states, by engine (a snapshot writer reads them asynchronously). */
  private readonly frozenLive = new WeakMap<FrozenEngine, Uint8Array>();

  constructor(
    readonly factory: string,
    private readonly opts: SketchOptions,
  ) {
    const m = SKETCH_FACTORY.exec(factory);
    if (!m) throw new Error(`not a BinarySketch factory: ${factory}`);
    this.nbits = Number(m[1]);
  }

  get snapshotKey(): string {
    return `${this.factory}-d${this.opts.dim}-s${ROTATION_SEED}`;
  }

  private newSketch(mean?: Float32Array): SketchIndexNative {
    const s = new SketchIndex(this.opts.dim, this.nbits, ROTATION_SEED);
    if (mean) s.setMean(mean);
    return s;
  }

  createEmpty(): SketchEngine {
    return new SketchEngine(this.factory, this.nbits, this.opts, this.newSketch(), new VectorStore(this.opts.dim, null, 0), 0, 0);
  }

  /** An in-memory engine trained on `sample` (tests, and the replica's small builds without a directory). */
  createTrained(sample: readonly ArrayLike<number>[]): SketchEngine {
    const trained = sample.length >= SKETCH_MIN_TRAIN;
    const mean = trained ? meanOf(sample, this.opts.dim) : undefined;
    return new SketchEngine(
      this.factory,
      this.nbits,
      this.opts,
      this.newSketch(mean),
      new VectorStore(this.opts.dim, null, 0),
      trained ? sample.length : 0,
      trained ? sample.length : 0,
    );
  }

  startBuild(sample: readonly EngineRow[], files: SnapshotWriter | null, expectedRows: number): EngineBuilder {
    if (!files) {
      const engine = this.createTrained(sample.map((r) => r.vector));
      const trainedAt = engine.trainedOn ? expectedRows : 0;
      const e = new SketchEngine(this.factory, this.nbits, this.opts, engine.sketch, engine.store, engine.trainedOn, trainedAt);
      return { add: (rows) => e.upsertMany(rows), finish: async () => ({ engine: e }), abort: () => e.close() };
    }
    const dim = this.opts.dim;
    const trained = sample.length >= SKETCH_MIN_TRAIN;
    const mean = trained
      ? meanOf(
          sample.map((r) => r.vector),
          dim,
        )
      : new Float32Array(dim);
    const sketch = this.newSketch(mean);
    const vectors = files.createRows(VECTORS_FILE, dim);
    const ids: Uint8Array[] = [];
    let rowCount = 0;
    return {
      add: (rows) => {
        if (rows.length === 0) return;
        const x = unitConcat(
          rows.map((r) => r.vector),
          dim,
        );
        const idBytes = new Uint8Array(rows.length * 16);
        rows.forEach((r, i) => uuidBytes(r.userId, idBytes, i * 16));
        sketch.addCodes(sketch.encode(x));
        vectors.write(x, idBytes);
        ids.push(idBytes);
        rowCount += rows.length;
      },
      finish: async () => {
        vectors.close();
        files.writeFile(CODES_FILE, sketch.getCodes(0, rowCount));
        files.writeFile(IDS_FILE, Buffer.concat(ids));
        const meta: SketchMeta = {
          nbits: this.nbits,
          seed: ROTATION_SEED,
          dim,
          rows: rowCount,
          trainedOn: trained ? sample.length : 0,
          trainedAtSize: trained ? rowCount : 0,
          mean: Buffer.from(mean.buffer, mean.byteOffset, mean.byteLength).toString('base64'),
        };
        return { engineMeta: meta };
      },
      abort: () => vectors.abort(),
    };
  }

  rebuildReason(engine: IndexEngine, p: RebuildPolicy): RebuildReason {
    const e = engine as SketchEngine;
    if (e.size >= SKETCH_MIN_TRAIN && e.size > p.growthFactor * e.trainedAtSize) return 'retrain';
    if (e.dead > 0 && e.dead >= Math.max(p.minDead, p.deadRatio * e.size)) return 'compact';
    // Rows appended since the snapshot live in memory (2 KB each): fold them into a new snapshot.
    if (e.overlayRows > 0 && e.overlayRows >= Math.max(p.foldMinRows, p.foldRatio * (e.rows - e.overlayRows))) return 'fold';
    return null;
  }

  freeze(engine: IndexEngine): FrozenEngine {
    const e = engine as SketchEngine;
    const frozen = { rows: e.rows, live: e.size };
    this.frozenLive.set(frozen, e.liveFlags(e.rows));
    return frozen;
  }

  async writeSnapshot(engine: IndexEngine, frozen: FrozenEngine, files: SnapshotWriter, retrain: boolean): Promise<unknown> {
    const e = engine as SketchEngine;
    const live = this.frozenLive.get(frozen);
    if (!live) throw new Error('unknown frozen state');
    const dim = this.opts.dim;
    let sketch: SketchIndexNative | null = null;
    let trainedOn = e.trainedOn,
      trainedAtSize = e.trainedAtSize;
    let mean = e.sketch.getMean();
    if (retrain) {
      // A uniform sample of the live rows (every step-th), read from the vector store.
      const step = Math.max(1, Math.floor(frozen.live / SAMPLE_SIZE));
      const sample: Float32Array[] = [];
      for (let p = 0, seen = 0; p < frozen.rows && sample.length < SAMPLE_SIZE; p++) {
        if (!live[p]) continue;
        if (seen++ % step === 0) sample.push(e.store.read(p, 1));
      }
      mean = meanOf(sample, dim);
      sketch = this.newSketch(mean);
      trainedOn = sample.length;
      trainedAtSize = frozen.live;
    }
    // Only live rows are copied, at new positions and under this snapshot's key: an erased user's row
    // is not in the new file at all.
    const vectors = files.createRows(VECTORS_FILE, dim);
    const codes = files.create(CODES_FILE);
    const ids = files.create(IDS_FILE);
    let written = 0;
    try {
      for (let from = 0; from < frozen.rows; from += CHUNK) {
        const count = Math.min(CHUNK, frozen.rows - from);
        let kept = 0;
        for (let i = 0; i < count; i++) if (live[from + i]) kept++;
        if (kept === 0) continue;
        const codeBytes = this.nbits / 8;
        const c = retrain ? null : e.sketch.getCodes(from, count);
        const keepV = new Float32Array(kept * dim);
        const keepC = new Uint8Array(kept * codeBytes);
        const keepI = new Uint8Array(kept * 16);
        // Runs of live rows are read together (a sealed row is decrypted as it is read).
        for (let i = 0, k = 0; i < count;) {
          if (!live[from + i]) {
            i++;
            continue;
          }
          let j = i;
          while (j < count && live[from + j]) j++;
          keepV.set(e.store.read(from + i, j - i), k * dim);
          for (let r = i; r < j; r++, k++) {
            if (c) keepC.set(c.subarray(r * codeBytes, (r + 1) * codeBytes), k * codeBytes);
            keepI.set(e.idBytes(from + r), k * 16);
          }
          i = j;
        }
        vectors.write(keepV, keepI);
        codes.write(retrain ? sketch!.encode(keepV) : keepC);
        ids.write(keepI);
        written += kept;
        await yieldToLoop(); // searches and catch-ups run between chunks
      }
    } catch (err) {
      vectors.abort();
      codes.abort();
      ids.abort();
      throw err;
    }
    vectors.close();
    codes.close();
    ids.close();
    const meta: SketchMeta = {
      nbits: this.nbits,
      seed: ROTATION_SEED,
      dim,
      rows: written,
      trainedOn,
      trainedAtSize,
      mean: Buffer.from(mean.buffer, mean.byteOffset, mean.byteLength).toString('base64'),
    };
    return meta;
  }

  /**
   * Opens a snapshot: codes and ids decrypted into memory, the re-rank rows mapped and every one of
   * them authenticated once (several threads, nothing kept). With `before-serving` the engine is
   * returned only after that: a snapshot with one altered, swapped or foreign row is refused
   * (SnapshotFileError) and the replica loads another or builds in full. With `background` it is
   * returned once the codes and ids are in memory, the check going on at the lowest CPU priority and
   * reported by the engine's `rowsChecked` (the replica then drops the snapshot and loads again);
   * meanwhile every search authenticates each row it reads, so a damaged row fails a search, never
   * enters an answer. At 10M the rows file is 20.8 GB: the check is most of a cold start.
   */
  async openSnapshot(files: SnapshotReader, engineMeta: unknown): Promise<SketchEngine> {
    const opts = this.opts;
    const m = engineMeta as SketchMeta;
    if (!m || m.nbits !== this.nbits || m.seed !== ROTATION_SEED || m.dim !== this.opts.dim) throw new Error('snapshot of another index type');
    const meanBytes = Buffer.from(m.mean, 'base64');
    if (meanBytes.length !== m.dim * 4) throw new Error('snapshot mean has the wrong size');
    const mean = new Float32Array(new Uint8Array(meanBytes).buffer);
    const background = opts.snapshotCheck === 'background';
    // The ids first: the rows' associated data names them, so the authentication of the rows (the
    // longest part: the whole rows file read and decrypted on native threads) can start at once and
    // run while the codes are decrypted and the id table is built on this thread.
    // A fresh, exact-size array (not a pooled Buffer slice): the native store keeps a reference to it.
    const idBytes = new Uint8Array(await files.read(IDS_FILE, m.rows * 16));
    let store: VectorStoreNative;
    let verified: Promise<number> | null = null;
    if (opts.clearVectorsFile) {
      // The benchmarks' clear reference: the same engine over a clear float32 file of the same rows.
      store = new VectorStore(m.dim, m.rows > 0 ? opts.clearVectorsFile : null, m.rows);
    } else if (m.rows > 0) {
      const { file, access } = files.rowsFile(VECTORS_FILE, m.dim);
      store = new VectorStore(m.dim, file, m.rows, { ...access, ids: idBytes });
      access.key.fill(0);
      verified = store.verify(background);
      verified.catch(() => {}); // awaited below; not an unhandled rejection if a step before fails
    } else store = new VectorStore(m.dim, null, 0);
    let codes: Buffer, ids: IdTable;
    try {
      codes = await files.read(CODES_FILE, m.rows * (this.nbits / 8));
      ids = new IdTable(idBytes);
      const bad = verified && !background ? await verified : -1;
      if (bad >= 0) throw new SnapshotFileError(notAuthentic(bad));
    } catch (err) {
      store.close(); // while the check still runs, the store closes when it ends
      throw err;
    }
    const sketch = this.newSketch(mean);
    sketch.addCodes(codes);
    const engine = new SketchEngine(this.factory, this.nbits, this.opts, sketch, store, m.trainedOn, m.trainedAtSize, ids);
    if (background && verified) {
      engine.rowsChecked = verified.then((row) => {
        if (row >= 0) throw new SnapshotRowsDamagedError(notAuthentic(row));
      });
      engine.rowsChecked.catch(() => {}); // the replica watches it; not an unhandled rejection before it does
    }
    return engine;
  }
}

const notAuthentic = (row: number) => `${VECTORS_FILE}: row ${row} does not authenticate (altered, or moved from another row, snapshot or user)`;

/** The user ids a snapshot lists, in row order (decrypted: for checks of what a snapshot holds). */
export async function snapshotUserIds(files: SnapshotReader): Promise<string[]> {
  const bytes = await files.read(IDS_FILE);
  const out: string[] = [];
  for (let o = 0; o + 16 <= bytes.length; o += 16) out.push(uuidString(bytes, o));
  return out;
}
