/**
 * The FAISS float engines (`Flat`, `IVF…`, `PQ…`, any inner-product factory string) behind the engine
 * interface (engine.ts): the service's first index, kept for comparison and for deployments that want
 * exact `Flat` (docs/vector-index.md). `FaissEngine` is one in-memory FAISS index of a replica with its
 * own id mapping; `FaissKind` builds them. No snapshots (a start is a full build from PostgreSQL);
 * compaction and training are full rebuilds. Approximate types are re-scored exactly by the replica.
 *
 * faiss-node has no add-with-ids: a vector's label is its row position (0, 1, 2, ... in add order).
 * This wrapper keeps `position -> userId` and `userId -> position` itself and NEVER calls removeIds:
 *   - on flat indexes removeIds renumbers every later row (the mapping would have to be rewritten),
 *   - on IVF indexes the next add reuses labels from `ntotal`, which collide with surviving ones,
 *   - on HNSW removeIds aborts the process, and IDMap's add aborts it too.
 * Instead a removal (or the old row of an updated user) becomes a tombstone: its position maps to
 * nothing, a search asks FAISS for k + (number of tombstones) rows and drops the dead ones, so it
 * still returns the k best live users and never a removed one. The replica (replica.ts) compacts by
 * rebuilding from PostgreSQL when tombstones pile up.
 *
 * Index type: any FAISS factory string, inner-product metric (cosine on unit vectors). Types that
 * need training (IVF, PQ, SQ, ...) are trained on the data present at build time, on a sample; below
 * the type's minimum training size the index falls back to exact `Flat` until a rebuild finds enough
 * data. For IVF types the number of probed lists (`nprobe`), which faiss-node cannot set, is written
 * into the trained index's serialised header (see `setNprobe`).
 *
 * Everything here is synchronous native code on the caller's thread: keep one index per thread.
 */
import { createRequire } from 'node:module';
import { EMBEDDING_DIM } from '../../../platform/face/embeddings.js';
import type { EngineBuilder, EngineKind, EngineRow, IndexEngine, RebuildPolicy, RebuildReason, VectorHit } from './engine.js';

type Faiss = typeof import('faiss-node');
const faiss = createRequire(import.meta.url)('faiss-node') as Faiss;
type FaissIndex = InstanceType<Faiss['Index']>;
const INNER_PRODUCT = 0; // faiss MetricType.METRIC_INNER_PRODUCT

export interface FactoryInfo {
  factory: string;
  /** Inverted lists of an IVF type, else null. */
  nlist: number | null;
  /** Smallest number of vectors the type is trained on; below it the index is exact `Flat`. */
  minTrain: number;
  /** How many vectors training uses at most (a sample of the data). */
  trainSample: number;
}

/** FAISS wants about 39 training points per centroid (it warns below that, and aborts below 1). */
const POINTS_PER_CENTROID = 39;
const GENERIC_MIN_TRAIN = 1000;

/** Reads what the factory string implies for training; refuses types this wrapper cannot drive. */
export function describeFactory(factory: string): FactoryInfo {
  const f = factory.trim();
  if (!f) throw new Error('VECTOR_INDEX_FACTORY is empty');
  if (/IDMap/i.test(f)) throw new Error(`VECTOR_INDEX_FACTORY ${f}: IDMap types cannot be used (faiss-node's add aborts on them; ids are mapped here)`);
  if (/^B|,B|BHash|BFlat|BIVF/.test(f)) throw new Error(`VECTOR_INDEX_FACTORY ${f}: binary index types are not supported`);
  const ivf = /IVF(\d+)/.exec(f);
  const nlist = ivf ? Number(ivf[1]) : null;
  let minTrain = GENERIC_MIN_TRAIN;
  if (nlist) minTrain = Math.max(minTrain, POINTS_PER_CENTROID * nlist);
  for (const m of f.matchAll(/PQ(\d+)(?:x(\d+))?/g)) {
    const bits = m[2] ? Number(m[2]) : 8;
    minTrain = Math.max(minTrain, POINTS_PER_CENTROID * 2 ** bits);
  }
  const trainSample = Math.max(minTrain, nlist ? Math.min(64 * nlist, 131_072) : 50_000);
  return { factory: f, nlist, minTrain, trainSample };
}

/** Serialised IVF header layout (faiss write_index, metric without argument): fourcc 'Iw..', then
 *  d:int32@4, ntotal:int64@8, 2x dummy:int64@16, is_trained:u8@32, metric:int32@33, nlist:u64@37,
 *  nprobe:u64@45. */
const IVF_NLIST_OFFSET = 37;
const IVF_NPROBE_OFFSET = 45;

/**
 * Returns a copy of an (empty, trained) IVF index with `nprobe` set, or null when the index is not a
 * plain IVF type whose header this code recognises (then nprobe stays at FAISS's default 1).
 */
export function setNprobe(index: FaissIndex, nlist: number, nprobe: number): FaissIndex | null {
  const buf = index.toBuffer();
  if (buf.length < IVF_NPROBE_OFFSET + 8 || buf.toString('latin1', 0, 2) !== 'Iw') return null;
  if (buf.readInt32LE(4) !== index.getDimension() || buf.readInt32LE(33) !== INNER_PRODUCT) return null;
  if (buf.readBigUInt64LE(IVF_NLIST_OFFSET) !== BigInt(nlist)) return null;
  buf.writeBigUInt64LE(BigInt(Math.max(1, Math.min(nprobe, nlist))), IVF_NPROBE_OFFSET);
  return faiss.Index.fromBuffer(buf);
}

/** Reads nprobe back from an IVF index (null for other types). */
export function readNprobe(index: FaissIndex, nlist: number | null): number | null {
  if (!nlist) return null;
  const buf = index.toBuffer();
  if (buf.toString('latin1', 0, 2) !== 'Iw' || buf.readBigUInt64LE(IVF_NLIST_OFFSET) !== BigInt(nlist)) return null;
  return Number(buf.readBigUInt64LE(IVF_NPROBE_OFFSET));
}

export interface FaissEngineOptions {
  /** FAISS factory string (inner product). */
  factory: string;
  /** Probed lists for IVF types (ignored otherwise). */
  nprobe?: number;
  dim?: number;
}

/** An empty, trained index to start from again (compaction without retraining). */
export interface IndexTemplate {
  buffer: Buffer;
  effectiveFactory: string;
  fallback: boolean;
  trainedOn: number;
}

export class FaissEngine implements IndexEngine {
  private readonly posToUser: (string | null)[] = [];
  private readonly userToPos = new Map<string, number>();
  private deadCount = 0;

  private constructor(
    private index: FaissIndex,
    readonly info: FactoryInfo,
    /** The factory actually in use: `Flat` while the configured type lacks training data. */
    readonly effectiveFactory: string,
    readonly fallback: boolean,
    /** Vectors the index was trained on (0: no training needed or fallback). */
    readonly trainedOn: number,
    private probes: number | null,
    readonly dim: number,
  ) {}

  /** The configured factory string. */
  get factory(): string {
    return this.info.factory;
  }

  private bytesPerRow: number | undefined;

  /**
   * Bytes of the FAISS index: Flat is 4 bytes per dimension per row; other types are serialised once
   * (a full copy) to learn their bytes per row, then estimated (health checks call this).
   */
  memoryBytes(): number {
    if (this.exact) return this.rows * this.dim * 4;
    if (this.bytesPerRow === undefined || this.rows < 10_000) {
      const bytes = this.serialisedBytes();
      if (this.rows < 10_000 || this.bytesPerRow === undefined) this.bytesPerRow = this.rows ? bytes / this.rows : undefined;
      if (this.rows < 10_000) return bytes;
    }
    return this.rows * (this.bytesPerRow ?? 0);
  }

  close(): void {}

  /** Inverted lists probed per query (IVF types), else null. */
  get nprobe(): number | null {
    return this.probes;
  }

  /**
   * Changes nprobe of a populated IVF index. It goes through the serialised index, i.e. a full copy
   * (memory and time grow with the index): for tuning and benchmarks, not the request path.
   */
  retune(nprobe: number): boolean {
    if (this.fallback || !this.info.nlist) return false;
    const tuned = setNprobe(this.index, this.info.nlist, nprobe);
    if (!tuned) return false;
    if (tuned.ntotal() !== this.index.ntotal()) throw new Error('retune lost rows');
    this.index = tuned;
    this.probes = Math.max(1, Math.min(nprobe, this.info.nlist));
    return true;
  }

  /**
   * A new, empty index of the configured type, trained on `trainingSet` when the type needs
   * training (pass a sample of the data present, up to `describeFactory(f).trainSample` vectors).
   * With fewer than `minTrain` vectors the index is exact `Flat` (fallback).
   */
  static create(opts: FaissEngineOptions, trainingSet: readonly ArrayLike<number>[] = []): FaissEngine {
    const dim = opts.dim ?? EMBEDDING_DIM;
    const info = describeFactory(opts.factory);
    let index = faiss.Index.fromFactory(dim, info.factory, INNER_PRODUCT);
    let effective = info.factory;
    let fallback = false;
    let trainedOn = 0;
    if (!index.isTrained()) {
      if (trainingSet.length < info.minTrain) {
        index = faiss.Index.fromFactory(dim, 'Flat', INNER_PRODUCT);
        effective = 'Flat';
        fallback = true;
      } else {
        const sample = trainingSet.length > info.trainSample ? trainingSet.slice(0, info.trainSample) : trainingSet;
        index.train(flatten(sample, dim));
        if (!index.isTrained()) throw new Error(`${info.factory}: still untrained after training on ${sample.length} vectors`);
        trainedOn = sample.length;
      }
    }
    let nprobe: number | null = null;
    if (!fallback && info.nlist) {
      const tuned = setNprobe(index, info.nlist, opts.nprobe ?? 1);
      if (tuned) index = tuned;
      nprobe = readNprobe(index, info.nlist);
    }
    return new FaissEngine(index, info, effective, fallback, trainedOn, nprobe, dim);
  }

  /** The empty trained state of this index, to build a fresh copy from (call before adding). */
  template(): IndexTemplate {
    if (this.index.ntotal() !== 0) throw new Error('template() needs an empty index');
    return { buffer: this.index.toBuffer(), effectiveFactory: this.effectiveFactory, fallback: this.fallback, trainedOn: this.trainedOn };
  }

  static fromTemplate(opts: FaissEngineOptions, t: IndexTemplate): FaissEngine {
    const dim = opts.dim ?? EMBEDDING_DIM;
    const info = describeFactory(opts.factory);
    const index = faiss.Index.fromBuffer(t.buffer);
    if (index.ntotal() !== 0 || !index.isTrained() || index.getDimension() !== dim) throw new Error('unusable index template');
    return new FaissEngine(index, info, t.effectiveFactory, t.fallback, t.trainedOn, t.fallback ? null : readNprobe(index, info.nlist), dim);
  }

  /** Size of the serialised FAISS index (about its memory). Copies the whole index: diagnostics only. */
  serialisedBytes(): number {
    return this.index.toBuffer().length;
  }

  /** Exact inner-product search (scores are exact cosines)? */
  get exact(): boolean {
    return this.effectiveFactory === 'Flat' || this.effectiveFactory === 'IndexFlatIP';
  }

  /** Live users in the index. */
  get size(): number {
    return this.userToPos.size;
  }

  /** Tombstones (rows of removed or replaced vectors still inside FAISS). */
  get dead(): number {
    return this.deadCount;
  }

  /** Rows inside FAISS, live and dead. */
  get rows(): number {
    return this.posToUser.length;
  }

  has(userId: string): boolean {
    return this.userToPos.has(userId);
  }

  /**
   * Adds or replaces vectors (a user already present gets a new row; the old one becomes a
   * tombstone). Vectors are L2-normalised here. One native call for the whole batch.
   */
  upsertMany(entries: readonly { userId: string; vector: ArrayLike<number> }[]): void {
    if (entries.length === 0) return;
    const seen = new Set<string>();
    const batch: { userId: string; vector: ArrayLike<number> }[] = [];
    // Last write wins inside a batch.
    for (let i = entries.length - 1; i >= 0; i--) {
      const e = entries[i]!;
      if (seen.has(e.userId)) continue;
      seen.add(e.userId);
      if (e.vector.length !== this.dim) throw new RangeError(`vector of ${e.vector.length} values for a ${this.dim}-d index`);
      batch.push(e);
    }
    batch.reverse();
    const flat = flatten(
      batch.map((e) => e.vector),
      this.dim,
      true,
    );
    const first = this.posToUser.length;
    if (this.index.ntotal() !== first) throw new Error(`index out of step with its id map (${this.index.ntotal()} rows, ${first} mapped)`);
    this.index.add(flat);
    for (let i = 0; i < batch.length; i++) {
      const userId = batch[i]!.userId;
      this.bury(userId);
      this.posToUser.push(userId);
      this.userToPos.set(userId, first + i);
    }
  }

  upsert(userId: string, vector: ArrayLike<number>): void {
    this.upsertMany([{ userId, vector }]);
  }

  /** Removes a user (a tombstone); false when absent. */
  remove(userId: string): boolean {
    return this.bury(userId);
  }

  private bury(userId: string): boolean {
    const pos = this.userToPos.get(userId);
    if (pos === undefined) return false;
    this.userToPos.delete(userId);
    this.posToUser[pos] = null;
    this.deadCount++;
    return true;
  }

  /** The k most similar live users, best first (scores: inner products of unit vectors). */
  search(query: ArrayLike<number>, k: number): VectorHit[] {
    return this.searchMany([query], k)[0]!;
  }

  /** One native call for several queries (FAISS batches them: much cheaper per query). */
  searchMany(queries: readonly ArrayLike<number>[], k: number): VectorHit[][] {
    if (!Number.isInteger(k) || k < 1) throw new RangeError('k must be a positive integer');
    for (const q of queries) if (q.length !== this.dim) throw new RangeError(`query of ${q.length} values for a ${this.dim}-d index`);
    const rows = this.posToUser.length;
    if (queries.length === 0) return [];
    if (this.size === 0 || rows === 0) return queries.map(() => []);
    // Enough rows that k live ones remain after dropping every tombstone (FAISS refuses k > ntotal).
    const kk = Math.min(rows, k + this.deadCount);
    const { labels, distances } = this.index.search(flatten(queries, this.dim, true), kk);
    const out: VectorHit[][] = [];
    for (let qi = 0; qi < queries.length; qi++) {
      const hits: VectorHit[] = [];
      for (let j = qi * kk; j < (qi + 1) * kk && hits.length < k; j++) {
        const label = labels[j]!;
        if (label < 0) continue; // FAISS pads with -1 when a probed region has fewer rows
        const userId = this.posToUser[label];
        if (userId == null) continue; // tombstone
        hits.push({ userId, score: Math.max(-1, Math.min(1, distances[j]!)) });
      }
      out.push(hits);
    }
    return out;
  }
}

/**
 * Concatenates vectors (L2-normalised when `unit`) into the plain array faiss-node wants: it reads
 * JS arrays only, element by element, which is most of the cost of building a large index.
 */
function flatten(vectors: readonly ArrayLike<number>[], dim: number, unit = false): number[] {
  const out = new Array<number>(vectors.length * dim);
  let o = 0;
  for (const v of vectors) {
    if (v.length !== dim) throw new RangeError(`vector of ${v.length} values, expected ${dim}`);
    let scale = 1;
    if (unit) {
      let ss = 0;
      for (let i = 0; i < dim; i++) ss += v[i]! * v[i]!;
      if (!(ss > 0) || !Number.isFinite(ss)) throw new RangeError('zero or non-finite vector');
      scale = 1 / Math.sqrt(ss);
    }
    for (let i = 0; i < dim; i++) out[o++] = v[i]! * scale;
  }
  return out;
}

export class FaissKind implements EngineKind {
  readonly snapshots = false;
  readonly info: FactoryInfo;
  constructor(
    readonly factory: string,
    private readonly nprobe: number,
    private readonly dim: number,
  ) {
    this.info = describeFactory(factory);
  }
  get sampleSize(): number {
    return FaissEngine.create({ factory: this.factory, nprobe: 1, dim: this.dim }, []).fallback ? this.info.trainSample : 0;
  }
  get snapshotKey(): string {
    return this.factory;
  }
  createEmpty(): IndexEngine {
    return FaissEngine.create({ factory: this.factory, nprobe: this.nprobe, dim: this.dim }, []);
  }
  startBuild(sample: readonly EngineRow[]): EngineBuilder {
    const index = FaissEngine.create(
      { factory: this.factory, nprobe: this.nprobe, dim: this.dim },
      sample.map((r) => r.vector),
    );
    return { add: (rows) => index.upsertMany(rows), finish: async () => ({ engine: index }), abort: () => {} };
  }
  rebuildReason(engine: IndexEngine, p: RebuildPolicy): RebuildReason {
    const index = engine as FaissEngine;
    if (index.fallback && index.size >= this.info.minTrain) return 'retrain';
    if (index.dead > 0 && index.dead >= Math.max(p.minDead, p.deadRatio * index.size)) return 'compact';
    return null;
  }
}
