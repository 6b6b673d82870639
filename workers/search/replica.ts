/**
 * One search replica: an index engine kept in step with PostgreSQL (docs/vector-index.md). This file
 * is engine-neutral; the engines are behind engine.ts (sketch-engine.ts, faiss-engine.ts) and every
 * SQL statement behind change-log-source.ts.
 *
 * - Start: the newest valid snapshot of this change log (snapshot-store.ts: lineage, engine type,
 *   sizes and SHA-256 checked; its seq not below the pruned point) plus the changes after it; without
 *   one, a full build from one REPEATABLE READ snapshot of PostgreSQL, which is itself written as a
 *   snapshot and opened from it (so "snapshot start" and "full build" are the same index).
 * - Catch-up: read the changes after `appliedSeq` (seq order, in batches), fetch the CURRENT rows of
 *   the users they name, apply them (row present: upsert; absent: remove), advance `appliedSeq`.
 *   Applying current state is idempotent. shared/repositories/embeddings.ts makes seqs commit in order, so nothing can
 *   appear later below `appliedSeq`. If the log was pruned past `appliedSeq` (this replica was away),
 *   the replica stops answering and rebuilds (from a snapshot at or after the pruned point, or in full).
 * - Read-your-writes: a `knn` job carries `minSeq`; the replica catches up to it before searching, and
 *   checks and searches in the same synchronous step.
 * - Micro-batching: `knn` jobs that are waiting together go to the engine in ONE call (up to
 *   SEARCH_MAX_BATCH), after one catch-up to the largest `minSeq` among them.
 * - Rebuilds beside the serving index, then a swap: compaction (tombstones), fold (rows appended
 *   since the snapshot), retraining when the population has grown past SEARCH_RETRAIN_GROWTH times
 *   the size it was trained at. With snapshots these are written from the replica's own state (no
 *   PostgreSQL read) as a new snapshot, opened, caught up and swapped in.
 * - Positions: each replica records its `appliedSeq` and snapshot seq in `search_replicas`; the
 *   change log is pruned below what every fresh replica has applied and can restart from.
 */
import type { Knex } from 'knex';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { FACE_ENGINE_VERSION } from '../../shared/face-models.js';
import { EMBEDDING_DIM, assertEmbedding, dot, normalised } from '../../shared/embeddings.js';
import type { SearchHit, SearchResult } from '../../shared/jobs/index.js';
import type { Logger } from '../../shared/logger.js';
import { PgChangeLogSource, type ChangeLogSource, type SourceRow } from './change-log-source.js';
import type { EngineBuilder, EngineKind, IndexEngine, RebuildPolicy, RebuildReason } from './engine.js';
import { FaissKind } from './faiss-engine.js';
import { DEFAULT_EXACT_CANDIDATES, SKETCH_FACTORY, SketchKind } from './sketch-engine.js';
import { SnapshotStore, type Snapshot } from './snapshot-store.js';

export interface ReplicaOptions {
  factory: string;
  nprobe: number;
  logger: Logger;
  /** Background catch-up period; 0 disables it. */
  syncIntervalMs: number;
  /** Embeddings of other engine versions are not comparable and are left out. */
  engineVersion?: string;
  /** Where snapshots live; null: no snapshots (every start is a full build). */
  snapshotDir?: string | null;
  /** BinarySketch: candidates per query taken from the Hamming scan. */
  rerankCandidates?: number;
  /** BinarySketch: of those, how many are re-ranked exactly (best by the asymmetric estimate; 0: all). */
  exactCandidates?: number;
  /** Most knn searches in one engine call. */
  maxBatch?: number;
  /** Retrain once the population exceeds this factor times the size it was trained at. */
  retrainGrowth?: number;
  /** Compact when tombstones >= max(compactMinDead, compactDeadRatio * live). */
  compactMinDead?: number;
  compactDeadRatio?: number;
  /** Fold rows appended since the snapshot when they reach max(foldMinRows, foldRatio * snapshot rows). */
  foldMinRows?: number;
  foldRatio?: number;
  /** Prune the change log this often (0: never). */
  pruneIntervalMs?: number;
  /** Positions older than this do not hold back pruning. */
  replicaStaleMs?: number;
  replicaId?: string;
  /** Rows per page when reading canonical_embeddings. */
  pageSize?: number;
  /** Changes read per catch-up round trip. */
  changeBatch?: number;
  /** Candidates fetched per requested hit from an approximate FAISS index, re-scored from PostgreSQL. */
  refineFactor?: number;
  /** Automatic rebuilds (compaction, fold, retraining) after a catch-up; tests turn it off to drive them. */
  autoRebuild?: boolean;
  source?: ChangeLogSource;
  dim?: number;
}

interface State {
  engine: IndexEngine;
  appliedSeq: bigint;
  /** The seq of the snapshot the engine was opened from (null: none written or loaded). */
  snapshotSeq: bigint | null;
  snapshotDir: string | null;
  /** Set when the change log was pruned past appliedSeq: this state must not answer. */
  invalid?: boolean;
  running?: Promise<void>;
  queued?: Promise<void>;
}

export interface BuildStats {
  at: string;
  ms: number;
  trainMs: number;
  rows: number;
  reason: string;
  from: 'snapshot' | 'postgres' | 'own-state';
  snapshotSeq: string | null;
}

interface PendingSearch {
  query: Float32Array;
  k: number;
  minSeq: bigint;
  t0: number;
  resolve: (r: Extract<SearchResult, { op: 'knn' }>) => void;
  reject: (e: unknown) => void;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const elapsed = (t0: number) => Math.round((performance.now() - t0) * 10) / 10;

export function engineKindFor(factory: string, opts: { nprobe: number; rerankCandidates: number; exactCandidates?: number; dim: number }): EngineKind {
  if (SKETCH_FACTORY.test(factory.trim())) return new SketchKind(factory.trim(), { dim: opts.dim, candidates: opts.rerankCandidates, exactCandidates: opts.exactCandidates ?? DEFAULT_EXACT_CANDIDATES });
  return new FaissKind(factory, opts.nprobe, opts.dim);
}

export class IndexReplica {
  private state: State | undefined;
  private rebuilding: Promise<void> | undefined;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private logId: string | undefined;
  private pending: PendingSearch[] = [];
  private flushing = false;
  private lastReport = { seq: -1n, at: 0 };
  readonly kind: EngineKind;
  readonly source: ChangeLogSource;
  readonly snapshots: SnapshotStore | null;
  readonly engineVersion: string;
  readonly replicaId: string;
  private readonly maxBatch: number;
  private readonly policy: RebuildPolicy;
  private readonly pageSize: number;
  private readonly changeBatch: number;
  private readonly refineFactor: number;
  /** Figures for /health and the benchmarks. */
  readonly stats = {
    lastBuild: undefined as BuildStats | undefined,
    builds: 0,
    catchUps: 0,
    changesApplied: 0,
    otherEngineRows: 0,
    snapshotsRefused: 0,
    batches: 0,
    batchedSearches: 0,
    largestBatch: 0,
    pruned: { through: '0', deleted: 0 },
  };

  constructor(db: Knex, private readonly opts: ReplicaOptions) {
    const dim = opts.dim ?? EMBEDDING_DIM;
    this.kind = engineKindFor(opts.factory, { nprobe: opts.nprobe, rerankCandidates: opts.rerankCandidates ?? 2000, exactCandidates: opts.exactCandidates, dim });
    this.source = opts.source ?? new PgChangeLogSource(db);
    this.snapshots = this.kind.snapshots && opts.snapshotDir ? new SnapshotStore(opts.snapshotDir) : null;
    this.engineVersion = opts.engineVersion ?? FACE_ENGINE_VERSION;
    this.replicaId = opts.replicaId ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.maxBatch = opts.maxBatch ?? 32;
    this.policy = {
      growthFactor: opts.retrainGrowth ?? 2,
      minDead: opts.compactMinDead ?? 1000,
      deadRatio: opts.compactDeadRatio ?? 0.2,
      foldMinRows: opts.foldMinRows ?? 50_000,
      foldRatio: opts.foldRatio ?? 0.1,
    };
    this.pageSize = opts.pageSize ?? 2000;
    this.changeBatch = opts.changeBatch ?? 5000;
    this.refineFactor = opts.refineFactor ?? 4;
  }

  get ready(): boolean {
    return this.state !== undefined;
  }

  get engine(): IndexEngine {
    if (!this.state) throw new Error('the index is not built yet');
    return this.state.engine;
  }

  /** The serving engine (older name). */
  get index(): IndexEngine {
    return this.engine;
  }

  get appliedSeq(): bigint {
    return this.state?.appliedSeq ?? -1n;
  }

  get snapshotSeq(): bigint | null {
    return this.state?.snapshotSeq ?? null;
  }

  /** Loads (snapshot + changes, or a full build), catches up, then starts the background work. */
  async start(): Promise<void> {
    this.logId = await this.source.logId();
    const s = await this.load('start');
    await this.requestCatchUp(s);
    this.state = s;
    await this.report(true);
    if (this.opts.syncIntervalMs > 0) {
      this.every(this.opts.syncIntervalMs, async () => {
        if (this.state) await this.requestCatchUp(this.state);
        await this.report(false);
      });
    }
    if ((this.opts.pruneIntervalMs ?? 0) > 0) this.every(this.opts.pruneIntervalMs!, () => this.prune().then(() => {}));
  }

  private every(ms: number, fn: () => Promise<void>): void {
    let busy = false;
    const t = setInterval(() => {
      if (busy || this.stopped) return;
      busy = true;
      fn()
        .catch((e) => this.opts.logger.warn({ err: errMessage(e) }, 'search replica background work failed'))
        .finally(() => (busy = false));
    }, ms);
    t.unref();
    this.timers.push(t);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await Promise.allSettled([this.state?.running, this.state?.queued, this.rebuilding]);
    for (const p of this.pending.splice(0)) p.reject(new Error('the search replica is stopping'));
    await this.source.forgetReplica(this.replicaId).catch(() => {});
  }

  /** Records this replica's position (throttled to once per second unless `force`). */
  private async report(force: boolean): Promise<void> {
    const s = this.state;
    if (!s || s.invalid) return;
    const now = Date.now();
    if (!force && s.appliedSeq === this.lastReport.seq && now - this.lastReport.at < 5000) return;
    if (!force && now - this.lastReport.at < 1000) return;
    this.lastReport = { seq: s.appliedSeq, at: now };
    await this.source.reportPosition(this.replicaId, s.appliedSeq, s.snapshotSeq);
  }

  /** Prunes the change log below what every fresh replica has applied (and can restart without). */
  async prune(): Promise<{ through: bigint; deleted: number }> {
    await this.report(true);
    const r = await this.source.prune(this.opts.replicaStaleMs ?? 600_000);
    this.stats.pruned = { through: String(r.through), deleted: this.stats.pruned.deleted + r.deleted };
    if (r.deleted) this.opts.logger.info({ through: String(r.through), deleted: r.deleted }, 'change log pruned');
    return r;
  }

  // ---- loading ----------------------------------------------------------------------------------

  /** The newest usable snapshot plus nothing else (catch-up follows), or a full build. */
  private async load(reason: string): Promise<State> {
    const fromSnapshot = await this.loadSnapshot(reason);
    return fromSnapshot ?? this.fullBuild(reason);
  }

  private async loadSnapshot(reason: string): Promise<State | undefined> {
    if (!this.snapshots || !this.kind.openSnapshot) return undefined;
    const t0 = performance.now();
    const [list, head, pruned] = await Promise.all([this.snapshots.list(this.logId!, this.kind.snapshotKey), this.source.headSeq(), this.source.prunedThrough()]);
    for (const snap of list) {
      const seq = BigInt(snap.meta.seq);
      const refuse = (why: string) => {
        this.stats.snapshotsRefused++;
        this.opts.logger.warn({ dir: snap.dir, seq: snap.meta.seq, why }, 'snapshot refused');
      };
      if (seq > head) {
        refuse(`its seq is past the change log head ${head}`);
        continue;
      }
      if (seq < pruned) {
        refuse(`the change log was pruned through ${pruned}: the changes after it are gone`);
        continue;
      }
      const bad = await this.snapshots.verify(snap);
      if (bad) {
        refuse(bad);
        continue;
      }
      try {
        const engine = await this.kind.openSnapshot(snap.dir, snap.meta.engineMeta);
        this.noteBuild(t0, 0, engine, reason, 'snapshot', seq);
        return { engine, appliedSeq: seq, snapshotSeq: seq, snapshotDir: snap.dir };
      } catch (e) {
        refuse(errMessage(e));
      }
    }
    return undefined;
  }

  /** Reads every embedding from PostgreSQL in one consistent snapshot; with snapshots, writes one. */
  private async fullBuild(reason: string): Promise<State> {
    const t0 = performance.now();
    let trainMs = 0;
    const tmp = this.snapshots ? await this.snapshots.begin() : null;
    let builder: EngineBuilder | undefined;
    try {
      const read = await this.source.readAll(
        this.engineVersion,
        { firstRows: Math.max(this.kind.sampleSize, this.pageSize), pageSize: this.pageSize },
        (rows: SourceRow[], total: number) => {
          const t1 = performance.now();
          builder = this.kind.startBuild(rows, tmp, total);
          trainMs = elapsed(t1);
          for (let i = 0; i < rows.length; i += this.pageSize) builder.add(rows.slice(i, i + this.pageSize));
        },
        (rows) => builder!.add(rows),
      );
      this.stats.otherEngineRows = read.otherEngineRows;
      const done = await builder!.finish();
      let engine = done.engine;
      let snap: Snapshot | undefined;
      if (tmp && this.snapshots && this.kind.openSnapshot) {
        snap = await this.snapshots.commit(tmp, { logId: this.logId!, seq: String(read.seq), engineKey: this.kind.snapshotKey, rows: read.rows, engineMeta: done.engineMeta });
        engine = await this.kind.openSnapshot(snap.dir, done.engineMeta);
        void this.retireSnapshots(snap.dir);
      }
      if (!engine) throw new Error('the engine build produced no index');
      this.noteBuild(t0, trainMs, engine, reason, 'postgres', snap ? read.seq : null);
      return { engine, appliedSeq: read.seq, snapshotSeq: snap ? read.seq : null, snapshotDir: snap?.dir ?? null };
    } catch (e) {
      builder?.abort();
      if (tmp) await this.snapshots!.abort(tmp);
      throw e;
    }
  }

  private noteBuild(t0: number, trainMs: number, engine: IndexEngine, reason: string, from: BuildStats['from'], snapshotSeq: bigint | null): void {
    this.stats.builds++;
    this.stats.lastBuild = { at: new Date().toISOString(), ms: elapsed(t0), trainMs, rows: engine.size, reason, from, snapshotSeq: snapshotSeq === null ? null : String(snapshotSeq) };
    this.opts.logger.info(
      { reason, from, size: engine.size, factory: engine.factory, effectiveFactory: engine.effectiveFactory, ms: elapsed(t0), trainMs, snapshotSeq: snapshotSeq === null ? null : String(snapshotSeq) },
      'vector index ready',
    );
  }

  private async retireSnapshots(keepDir: string): Promise<void> {
    if (!this.snapshots) return;
    const inUse = new Set<string>([keepDir]);
    if (this.state?.snapshotDir) inUse.add(this.state.snapshotDir);
    await this.snapshots.retire(this.logId!, this.kind.snapshotKey, 2, inUse).catch(() => 0);
  }

  // ---- catch-up ---------------------------------------------------------------------------------

  /**
   * Resolves once a catch-up that STARTED AFTER this call has finished, so it has seen every change
   * committed before the call. Concurrent callers share runs.
   */
  private requestCatchUp(s: State): Promise<void> {
    if (s.queued) return s.queued;
    const run = () => {
      const p = this.runCatchUp(s).finally(() => {
        if (s.running === p) s.running = undefined;
      });
      s.running = p;
      return p;
    };
    if (!s.running) return run();
    const queued: Promise<void> = s.running
      .catch(() => {})
      .then(() => {
        s.queued = undefined;
        return run();
      });
    s.queued = queued;
    return queued;
  }

  private async runCatchUp(s: State): Promise<void> {
    this.stats.catchUps++;
    for (;;) {
      const { prunedThrough, changes } = await this.source.changesAfter(s.appliedSeq, this.changeBatch);
      if (prunedThrough > s.appliedSeq) {
        // Changes this state never saw were deleted: it must not answer again.
        s.invalid = true;
        if (s === this.state) void this.rebuild('behind-pruned').catch((e) => this.opts.logger.error({ err: errMessage(e) }, 'rebuild after pruning failed'));
        return;
      }
      if (changes.length === 0) break;
      const ids = [...new Set(changes.map((c) => c.userId))];
      const current = await this.source.currentRows(ids, this.engineVersion);
      // Synchronous from here: no search sees a half-applied batch.
      const upserts: { userId: string; vector: Float32Array }[] = [];
      for (const id of ids) {
        const v = current.get(id);
        if (v) upserts.push({ userId: id, vector: v });
        else s.engine.remove(id);
      }
      s.engine.upsertMany(upserts);
      s.appliedSeq = changes[changes.length - 1]!.seq;
      this.stats.changesApplied += changes.length;
      if (changes.length < this.changeBatch) break;
    }
    if (s === this.state && this.opts.autoRebuild !== false) this.maybeRebuild(s);
  }

  private maybeRebuild(s: State): void {
    if (this.rebuilding || this.stopped) return;
    const why = this.kind.rebuildReason(s.engine, this.policy);
    // Without a snapshot directory there is nothing to fold into (and a reload would hold the same rows).
    if (why === 'fold' && !this.snapshots) return;
    if (why) void this.rebuild(why).catch((e) => this.opts.logger.error({ err: errMessage(e) }, 'vector index rebuild failed'));
  }

  /**
   * Builds a new index beside the serving one, catches it up, and swaps it in. With snapshots,
   * compaction / fold / retraining are written from the replica's own state; otherwise (and when the
   * replica fell behind the pruned log) the index is loaded again (snapshot or PostgreSQL).
   */
  rebuild(reason: NonNullable<RebuildReason> | 'behind-pruned' | 'full' | string = 'compact'): Promise<void> {
    this.rebuilding ??= (async () => {
      try {
        const current = this.state;
        let next: State;
        if (current && !current.invalid && this.snapshots && this.kind.freeze && this.kind.writeSnapshot && this.kind.openSnapshot && reason !== 'full') {
          next = await this.rebuildFromOwnState(current, reason);
        } else {
          next = reason === 'full' ? await this.fullBuild(reason) : await this.load(reason);
        }
        await this.requestCatchUp(next);
        if (next.invalid) throw new Error('the rebuilt index fell behind the pruned change log');
        if (this.stopped) {
          next.engine.close();
          return;
        }
        const old = this.state;
        this.state = next;
        if (old && old.engine !== next.engine) old.engine.close();
        await this.report(true).catch(() => {});
        if (next.snapshotDir) void this.retireSnapshots(next.snapshotDir);
      } finally {
        this.rebuilding = undefined;
      }
    })();
    return this.rebuilding;
  }

  private async rebuildFromOwnState(s: State, reason: string): Promise<State> {
    const t0 = performance.now();
    // Frozen in one synchronous step with the seq it reflects.
    const frozen = this.kind.freeze!(s.engine);
    const seq = s.appliedSeq;
    const tmp = await this.snapshots!.begin();
    try {
      const engineMeta = await this.kind.writeSnapshot!(s.engine, frozen, tmp, reason === 'retrain');
      const snap = await this.snapshots!.commit(tmp, { logId: this.logId!, seq: String(seq), engineKey: this.kind.snapshotKey, rows: frozen.live, engineMeta });
      const engine = await this.kind.openSnapshot!(snap.dir, engineMeta);
      this.noteBuild(t0, 0, engine, reason, 'own-state', seq);
      return { engine, appliedSeq: seq, snapshotSeq: seq, snapshotDir: snap.dir };
    } catch (e) {
      await this.snapshots!.abort(tmp);
      throw e;
    }
  }

  /** Writes a snapshot of the current state now (it also becomes the serving index). */
  snapshot(): Promise<void> {
    return this.rebuild('fold');
  }

  /**
   * Runs `fn` on a state that has applied at least `minSeq`, in the same synchronous step as the
   * check (a swap or a later change cannot slip in between).
   */
  async withAppliedAtLeast<T>(minSeq: bigint, fn: (s: State) => T): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const s = this.state;
      if (!s) throw new Error('the index is not built yet');
      if (s.invalid) {
        if (attempt >= 5) throw new Error('the index is being rebuilt (the change log was pruned past it)');
        await (this.rebuilding ?? this.rebuild('behind-pruned'));
        continue;
      }
      if (s.appliedSeq >= minSeq) return fn(s);
      if (attempt >= 3) {
        throw new Error(`change seq ${minSeq} is not in the change log (applied ${s.appliedSeq}): the API and this worker use different databases?`);
      }
      try {
        await this.requestCatchUp(s);
      } catch (e) {
        // A catch-up of a state that was swapped out meanwhile may fail (its engine is closed):
        // retry on the new state; a failure of the serving state's catch-up is the caller's error.
        if (this.state === s) throw e;
      }
    }
  }

  // ---- searching --------------------------------------------------------------------------------

  /** The `knn` op: the k best live users for `embedding`, after applying every change up to `minSeq`. */
  knn(embedding: ArrayLike<number>, k: number, minSeq: string): Promise<Extract<SearchResult, { op: 'knn' }>> {
    const t0 = performance.now();
    try {
      assertEmbedding(embedding, 'query embedding');
      if (!Number.isInteger(k) || k < 1 || k > 1000) throw new RangeError('k must be an integer in 1..1000');
      if (!/^\d+$/.test(minSeq)) throw new RangeError('minSeq must be a decimal integer');
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise((resolve, reject) => {
      this.pending.push({ query: normalised(embedding), k, minSeq: BigInt(minSeq), t0, resolve, reject });
      if (this.pending.length === 1 && !this.flushing) setImmediate(() => void this.flush());
    });
  }

  /** Sends the waiting searches to the engine, up to maxBatch per call, until none waits. */
  private async flush(): Promise<void> {
    if (this.flushing) return;
    this.flushing = true;
    try {
      while (this.pending.length) {
        const batch = this.pending.splice(0, this.maxBatch);
        try {
          await this.searchBatch(batch);
        } catch (e) {
          for (const p of batch) p.reject(e);
        }
        // Searches that arrived meanwhile form the next batch.
        if (this.pending.length) await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.flushing = false;
    }
  }

  private async searchBatch(batch: PendingSearch[]): Promise<void> {
    const minSeq = batch.reduce((m, p) => (p.minSeq > m ? p.minSeq : m), 0n);
    const { results, appliedSeq, size, exact } = await this.withAppliedAtLeast(minSeq, (s) => {
      const exactEngine = s.engine.exact;
      const kk = Math.max(...batch.map((p) => (exactEngine ? p.k : p.k * this.refineFactor)));
      return { results: s.engine.searchMany(batch.map((p) => p.query), kk), appliedSeq: s.appliedSeq, size: s.engine.size, exact: exactEngine };
    });
    this.stats.batches++;
    this.stats.batchedSearches += batch.length;
    this.stats.largestBatch = Math.max(this.stats.largestBatch, batch.length);
    await Promise.all(
      batch.map(async (p, i) => {
        try {
          const hits = exact ? results[i]!.slice(0, p.k) : (await this.rescore(p.query, results[i]!)).slice(0, p.k);
          p.resolve({ op: 'knn', hits, appliedSeq: String(appliedSeq), indexSize: size, ms: elapsed(p.t0) });
        } catch (e) {
          p.reject(e);
        }
      }),
    );
  }

  /** Approximate FAISS types: exact cosines from PostgreSQL (a user removed meanwhile drops out). */
  private async rescore(q: Float32Array, hits: SearchHit[]): Promise<SearchHit[]> {
    if (hits.length === 0) return hits;
    const rows = await this.source.currentRows(hits.map((h) => h.userId), this.engineVersion);
    return [...rows].map(([userId, v]) => ({ userId, score: clamp(dot(q, normalised(v))) })).sort((a, b) => b.score - a.score);
  }

  /** The `compare` op: cosine with the user's canonical embedding, read from PostgreSQL (always current). */
  async compare(embedding: ArrayLike<number>, userId: string): Promise<Extract<SearchResult, { op: 'compare' }>> {
    const t0 = performance.now();
    assertEmbedding(embedding, 'embedding');
    const row = UUID.test(userId) ? await this.source.readOne(userId) : undefined;
    if (!row) return { op: 'compare', score: null, reason: 'no_embedding', ms: elapsed(t0) };
    if (row.engineVersion !== this.engineVersion) return { op: 'compare', score: null, reason: 'engine_version_mismatch', ms: elapsed(t0) };
    const score = clamp(dot(normalised(embedding), normalised(row.vector)));
    return { op: 'compare', score, ms: elapsed(t0) };
  }

  health() {
    const s = this.state;
    return {
      status: s ? ('ok' as const) : ('starting' as const),
      replicaId: this.replicaId,
      size: s?.engine.size ?? 0,
      appliedSeq: s ? String(s.appliedSeq) : null,
      snapshotSeq: s?.snapshotSeq != null ? String(s.snapshotSeq) : null,
      factory: this.opts.factory,
      effectiveFactory: s?.engine.effectiveFactory ?? null,
      exact: s?.engine.exact ?? null,
      nprobe: s?.engine.nprobe ?? null,
      tombstones: s?.engine.dead ?? 0,
      indexMiB: s ? Math.round((s.engine.memoryBytes() / 2 ** 20) * 10) / 10 : null,
      rebuilding: this.rebuilding !== undefined,
      engineVersion: this.engineVersion,
      otherEngineRows: this.stats.otherEngineRows,
      lastBuild: this.stats.lastBuild ?? null,
      batches: { calls: this.stats.batches, searches: this.stats.batchedSearches, largest: this.stats.largestBatch },
      prunedThrough: this.stats.pruned.through,
    };
  }
}

const clamp = (x: number) => Math.max(-1, Math.min(1, x));
const errMessage = (e: unknown) => (e instanceof Error ? e.message : String(e));
