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
 * - The float32 vectors live outside the JS heap, in the native store's memory: a snapshot's
 *   `vectors.f32` is sealed under the key ring on disk (sealed-snapshot-files.ts), so it is decrypted
 *   into memory at open (it cannot be memory-mapped), and rows appended since the snapshot follow it
 *   (the "overlay"). Folding the overlay writes a new snapshot.
 * - Training: the mean vector of a uniform sample (centring makes the sign bits balanced for
 *   real embeddings, whose mean is far from 0). It is retrained when the population has grown past
 *   `SEARCH_RETRAIN_GROWTH` times the population it was trained at (replica.ts does that in the
 *   background, through a snapshot).
 */
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { EngineBuilder, EngineKind, EngineRow, FrozenEngine, IndexEngine, RebuildPolicy, RebuildReason, VectorHit } from './engine.js';
import type { SnapshotReader, SnapshotWriter } from './sealed-snapshot-files.js';
import { SketchIndex, VectorStore, type SketchIndexNative, type VectorStoreNative } from './search-kernel.js';

export const SKETCH_FACTORY = /^BinarySketch(256|512|1024|2048)$/;
/** Below this many rows the mean is not estimated (codes of uncentred vectors work, a little worse). */
export const SKETCH_MIN_TRAIN = 1000;
const SAMPLE_SIZE = 50_000;
const ROTATION_SEED = 1_234_567;
const CHUNK = 4096;

export interface SketchOptions {
  dim: number;
  /** Candidates taken from the Hamming scan, per query. */
  candidates: number;
  /**
   * Of those, how many are re-ranked exactly (float32 reads): the best by the asymmetric estimate
   * (the float query against the candidates' sign bits). 0 or >= candidates: all of them.
   */
  exactCandidates?: number;
}

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
  private readonly posToUser: (string | null)[] = [];
  private readonly userToPos = new Map<string, number>();
  private deadCount = 0;
  /** Rows that came from the snapshot this engine was opened from. */
  private readonly snapshotRows: number;

  constructor(
    readonly factory: string,
    readonly nbits: number,
    private readonly opts: SketchOptions,
    readonly sketch: SketchIndexNative,
    readonly store: VectorStoreNative,
    readonly trainedOn: number,
    readonly trainedAtSize: number,
    ids: readonly string[] = [],
  ) {
    this.snapshotRows = ids.length;
    for (let i = 0; i < ids.length; i++) {
      this.posToUser.push(ids[i]!);
      this.userToPos.set(ids[i]!, i);
    }
    if (sketch.ntotal() !== ids.length || store.rows() !== ids.length)
      throw new Error(`sketch engine out of step: ${sketch.ntotal()} codes, ${store.rows()} vectors, ${ids.length} ids`);
  }

  get effectiveFactory(): string {
    return this.factory;
  }
  get size(): number {
    return this.userToPos.size;
  }
  get dead(): number {
    return this.deadCount;
  }
  get rows(): number {
    return this.posToUser.length;
  }
  /** Rows appended since the snapshot (held in memory). */
  get overlayRows(): number {
    return this.store.rows() - this.snapshotRows;
  }
  get candidates(): number {
    return this.opts.candidates;
  }

  has(userId: string): boolean {
    return this.userToPos.has(userId);
  }

  userAt(pos: number): string | null {
    return this.posToUser[pos] ?? null;
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
    const x = unitConcat(
      batch.map((r) => r.vector),
      this.opts.dim,
    );
    const codes = this.sketch.encode(x);
    const first = this.posToUser.length;
    if (this.sketch.ntotal() !== first || this.store.rows() !== first) throw new Error('sketch engine out of step with its id map');
    const old: number[] = [];
    for (const r of batch) {
      const p = this.userToPos.get(r.userId);
      if (p !== undefined) old.push(p);
    }
    this.store.append(x);
    this.sketch.addCodes(codes);
    if (old.length) this.bury(old);
    for (let i = 0; i < batch.length; i++) {
      this.posToUser.push(batch[i]!.userId);
      this.userToPos.set(batch[i]!.userId, first + i);
    }
  }

  remove(userId: string): boolean {
    const p = this.userToPos.get(userId);
    if (p === undefined) return false;
    this.bury([p]);
    return true;
  }

  private bury(positions: number[]): void {
    this.sketch.setDead(Int32Array.from(positions), true);
    for (const p of positions) {
      const u = this.posToUser[p];
      if (u == null) continue;
      this.userToPos.delete(u);
      this.posToUser[p] = null;
      this.deadCount++;
    }
  }

  searchMany(queries: readonly Float32Array[], k: number): VectorHit[][] {
    if (!Number.isInteger(k) || k < 1) throw new RangeError('k must be a positive integer');
    if (queries.length === 0) return [];
    const q = unitConcat(queries, this.opts.dim);
    if (this.size === 0) return queries.map(() => []);
    const kc = Math.min(this.size, Math.max(k, this.opts.candidates));
    // Hamming candidates of every query in one pass, the best `exactCandidates` of them by the
    // asymmetric estimate, then the exact re-rank (native: reads those float32 rows with
    // prefetching, keeps the k best by exact score).
    const exactC = this.opts.exactCandidates ?? 0;
    const refine = exactC > 0 && exactC < kc ? Math.max(k, exactC) : 0;
    const { labels } = this.sketch.search(q, kc, refine);
    const best = this.store.rerank(q, labels, k);
    const out: VectorHit[][] = [];
    for (let qi = 0; qi < queries.length; qi++) {
      const hits: VectorHit[] = [];
      for (let j = qi * k; j < (qi + 1) * k; j++) {
        const p = best.labels[j]!;
        // Dead rows are skipped inside the scan; the id map is checked again (a tombstone is never returned).
        const userId = p >= 0 ? this.posToUser[p] : null;
        if (userId != null) hits.push({ userId, score: clamp(best.scores[j]!) });
      }
      out.push(hits);
    }
    return out;
  }

  memoryBytes(): number {
    // codes + dead flags (native), vectors appended since the snapshot, and the id maps (estimated:
    // about 130 bytes per row for a 36-character id string, its array slot and its Map entry).
    return this.sketch.memoryBytes() + this.store.overlayBytes() + this.rows * 130;
  }

  close(): void {
    this.store.close();
  }

  /** For snapshots: positions [0, rows) and which are live, captured now. */
  liveIds(rows: number): (string | null)[] {
    return this.posToUser.slice(0, rows);
  }
}

export class SketchKind implements EngineKind {
  readonly snapshots = true;
  readonly sampleSize = SAMPLE_SIZE;
  readonly nbits: number;
  /** Live ids of frozen states, by engine (a snapshot writer reads them asynchronously). */
  private readonly frozenIds = new WeakMap<FrozenEngine, (string | null)[]>();

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
    const vectors = files.create('vectors.f32');
    const ids: string[] = [];
    return {
      add: (rows) => {
        if (rows.length === 0) return;
        const x = unitConcat(
          rows.map((r) => r.vector),
          dim,
        );
        sketch.addCodes(sketch.encode(x));
        vectors.write(new Uint8Array(x.buffer, x.byteOffset, x.byteLength));
        for (const r of rows) ids.push(r.userId);
      },
      finish: async () => {
        vectors.close();
        files.writeFile('codes.bin', sketch.getCodes(0, ids.length));
        files.writeFile('ids.txt', Buffer.from(ids.join('\n'), 'utf8'));
        const meta: SketchMeta = {
          nbits: this.nbits,
          seed: ROTATION_SEED,
          dim,
          rows: ids.length,
          trainedOn: trained ? sample.length : 0,
          trainedAtSize: trained ? ids.length : 0,
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
    this.frozenIds.set(frozen, e.liveIds(e.rows));
    return frozen;
  }

  async writeSnapshot(engine: IndexEngine, frozen: FrozenEngine, files: SnapshotWriter, retrain: boolean): Promise<unknown> {
    const e = engine as SketchEngine;
    const ids = this.frozenIds.get(frozen);
    if (!ids) throw new Error('unknown frozen state');
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
        if (ids[p] == null) continue;
        if (seen++ % step === 0) sample.push(e.store.read(p, 1));
      }
      mean = meanOf(sample, dim);
      sketch = this.newSketch(mean);
      trainedOn = sample.length;
      trainedAtSize = frozen.live;
    }
    const vectors = files.create('vectors.f32');
    const codes = files.create('codes.bin');
    const liveIds: string[] = [];
    try {
      for (let from = 0; from < frozen.rows; from += CHUNK) {
        const count = Math.min(CHUNK, frozen.rows - from);
        const v = e.store.read(from, count);
        const c = retrain ? null : e.sketch.getCodes(from, count);
        const codeBytes = this.nbits / 8;
        const keepV = new Float32Array(count * dim);
        const keepC = new Uint8Array(count * codeBytes);
        let kept = 0;
        for (let i = 0; i < count; i++) {
          const id = ids[from + i];
          if (id == null) continue;
          keepV.set(v.subarray(i * dim, (i + 1) * dim), kept * dim);
          if (c) keepC.set(c.subarray(i * codeBytes, (i + 1) * codeBytes), kept * codeBytes);
          liveIds.push(id);
          kept++;
        }
        const vk = keepV.subarray(0, kept * dim);
        vectors.write(new Uint8Array(vk.buffer, 0, vk.byteLength));
        codes.write(retrain ? sketch!.encode(vk) : keepC.subarray(0, kept * codeBytes));
        await yieldToLoop(); // searches and catch-ups run between chunks
      }
    } finally {
      vectors.close();
      codes.close();
    }
    files.writeFile('ids.txt', Buffer.from(liveIds.join('\n'), 'utf8'));
    const meta: SketchMeta = {
      nbits: this.nbits,
      seed: ROTATION_SEED,
      dim,
      rows: liveIds.length,
      trainedOn,
      trainedAtSize,
      mean: Buffer.from(mean.buffer, mean.byteOffset, mean.byteLength).toString('base64'),
    };
    return meta;
  }

  async openSnapshot(files: SnapshotReader, engineMeta: unknown): Promise<SketchEngine> {
    const m = engineMeta as SketchMeta;
    if (!m || m.nbits !== this.nbits || m.seed !== ROTATION_SEED || m.dim !== this.opts.dim) throw new Error('snapshot of another index type');
    const meanBytes = Buffer.from(m.mean, 'base64');
    if (meanBytes.length !== m.dim * 4) throw new Error('snapshot mean has the wrong size');
    const mean = new Float32Array(new Uint8Array(meanBytes).buffer);
    // The vectors are decrypted on every core straight into one shared buffer, which the native store
    // then reads in place (adopted, not copied); the codes and ids meanwhile on this thread.
    const vectors = m.rows > 0 ? files.readShared('vectors.f32', m.rows * m.dim * 4) : Promise.resolve(new Uint8Array(0));
    vectors.catch(() => undefined); // awaited below; a failure before that is not left unhandled
    const codes = await files.read('codes.bin', m.rows * (this.nbits / 8));
    const idsText = (await files.read('ids.txt')).toString('utf8');
    const ids = m.rows === 0 ? [] : idsText.split('\n');
    if (ids.length !== m.rows) throw new Error('snapshot ids have the wrong count');
    const sketch = this.newSketch(mean);
    sketch.addCodes(codes);
    const plain = await vectors;
    const store = new VectorStore(m.dim, null, 0);
    if (m.rows > 0) store.adopt(new Float32Array(plain.buffer, plain.byteOffset, m.rows * m.dim));
    return new SketchEngine(this.factory, this.nbits, this.opts, sketch, store, m.trainedOn, m.trainedAtSize, ids);
  }
}
