/**
 * One search replica: an index engine kept in step with PostgreSQL (docs/vector-index.md). This file
 * is engine-neutral; the engines are behind engine.ts (sketch-engine.ts, faiss-engine.ts) and every
 * SQL statement behind change-log-source.ts. It composes three parts and owns the serving state:
 *
 * - loading (index-loader.ts): the newest valid snapshot plus the changes after it, or a full build;
 * - catch-up (catch-up.ts): the changes after `appliedSeq`, applied as the users' current rows;
 * - searching (batched-search.ts): read-your-writes `knn` in micro-batches, and `compare`.
 *
 * Here: start and stop, rebuilds beside the serving index then a swap (compaction of tombstones, fold
 * of rows appended since the snapshot, retraining when the population has grown past
 * SEARCH_RETRAIN_GROWTH times the size it was trained at; with snapshots written from the replica's
 * own state, without a PostgreSQL read), and positions: each replica records its `appliedSeq` and
 * snapshot seq in `search_replicas`; the change log is pruned below what every fresh replica has
 * applied and can restart from.
 */
import type { Knex } from 'knex';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { FACE_ENGINE_VERSION } from '../../../platform/face/face-models.js';
import { EMBEDDING_DIM } from '../../../platform/face/embeddings.js';
import type { SearchResult } from '../../../platform/jobs/index.js';
import type { Logger } from '../../../platform/logger.js';
import { BatchedSearch } from './batched-search.js';
import { CatchUp } from './catch-up.js';
import { PgChangeLogSource, type ChangeLogSource } from './change-log-source.js';
import type { ShardSpec } from '../../../platform/jobs/search-shards.js';
import type { EngineKind, IndexEngine, RebuildPolicy, RebuildReason } from './engine.js';
import { FaissKind } from './faiss-engine.js';
import { IndexLoader } from './index-loader.js';
import { elapsed, errMessage, newReplicaStats, type ReplicaState } from './replica-state.js';
import { DEFAULT_EXACT_CANDIDATES, SKETCH_FACTORY, SketchKind, SnapshotRowsDamagedError, type SnapshotCheck } from './sketch-engine.js';
import { SnapshotStore } from './snapshot-store.js';
import type { KeyRing } from '../../../platform/keys/key-ring.js';
import { processKeyRing } from '../../../platform/keys/templates.js';
import { ErasuresRepository } from '../../accounts/index.js';

export type { BuildStats } from './replica-state.js';

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
  /**
   * Benchmarks only (never configured): re-rank from this clear float32 file of the snapshot's rows,
   * in its row order, instead of the snapshot's sealed rows — the clear reference the sealed version
   * is measured against (bench/search.ts). Production has no such file: nothing is written in clear.
   */
  clearVectorsFile?: string;
  /** SEARCH_SNAPSHOT_CHECK: a snapshot's rows authenticated before the replica serves from it, or beside it (the default). */
  snapshotCheck?: SnapshotCheck;
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
  /** The shard this replica holds (SEARCH_SHARDS > 1): only its rows, its own snapshot lineage. */
  shard?: ShardSpec;
  /** Longest time a deleted user's vector may stay in a snapshot on disk (ERASURE_MAX_SECONDS). */
  erasureMaxSeconds?: number;
  /** The ring that opens the sealed templates (default: the process's, from BIOMETRIC_KEYS). */
  keyRing?: KeyRing;
  dim?: number;
}

export function engineKindFor(
  factory: string,
  opts: { nprobe: number; rerankCandidates: number; exactCandidates?: number; dim: number; clearVectorsFile?: string; snapshotCheck?: SnapshotCheck },
): EngineKind {
  if (SKETCH_FACTORY.test(factory.trim()))
    return new SketchKind(factory.trim(), {
      dim: opts.dim,
      candidates: opts.rerankCandidates,
      exactCandidates: opts.exactCandidates ?? DEFAULT_EXACT_CANDIDATES,
      clearVectorsFile: opts.clearVectorsFile,
      snapshotCheck: opts.snapshotCheck ?? 'background',
    });
  return new FaissKind(factory, opts.nprobe, opts.dim);
}

export class IndexReplica {
  private state: ReplicaState | undefined;
  private rebuilding: Promise<void> | undefined;
  private timers: NodeJS.Timeout[] = [];
  private stopped = false;
  private lastReport = { seq: -1n, at: 0 };
  /** When this replica last read the change log to its head (at start, then every sync). */
  private syncedAt = 0;
  readonly kind: EngineKind;
  readonly source: ChangeLogSource;
  readonly snapshots: SnapshotStore | null;
  readonly engineVersion: string;
  readonly replicaId: string;
  private readonly erasures: ErasuresRepository;
  private readonly policy: RebuildPolicy;
  private readonly loader: IndexLoader;
  private readonly catchUp: CatchUp;
  private readonly searches: BatchedSearch;
  /** Figures for /health and the benchmarks. */
  readonly stats = newReplicaStats();

  constructor(
    db: Knex,
    private readonly opts: ReplicaOptions,
  ) {
    const dim = opts.dim ?? EMBEDDING_DIM;
    this.kind = engineKindFor(opts.factory, {
      nprobe: opts.nprobe,
      rerankCandidates: opts.rerankCandidates ?? 2000,
      exactCandidates: opts.exactCandidates,
      dim,
      clearVectorsFile: opts.clearVectorsFile,
      snapshotCheck: opts.snapshotCheck,
    });
    this.source = opts.source ?? new PgChangeLogSource(db, opts.keyRing, opts.shard);
    this.erasures = new ErasuresRepository(db);
    this.snapshots = this.kind.snapshots && opts.snapshotDir ? new SnapshotStore(opts.snapshotDir, opts.keyRing ?? processKeyRing()) : null;
    this.engineVersion = opts.engineVersion ?? FACE_ENGINE_VERSION;
    this.replicaId = opts.replicaId ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.policy = {
      growthFactor: opts.retrainGrowth ?? 2,
      minDead: opts.compactMinDead ?? 1000,
      deadRatio: opts.compactDeadRatio ?? 0.2,
      foldMinRows: opts.foldMinRows ?? 50_000,
      foldRatio: opts.foldRatio ?? 0.1,
    };
    const { source, engineVersion, stats } = this;
    this.loader = new IndexLoader({
      kind: this.kind,
      source,
      snapshots: this.snapshots,
      engineVersion,
      pageSize: opts.pageSize ?? 2000,
      logger: opts.logger,
      stats,
      servingDir: () => this.state?.snapshotDir ?? null,
    });
    this.catchUp = new CatchUp({
      source,
      engineVersion,
      changeBatch: opts.changeBatch ?? 5000,
      stats,
      onPrunedPast: (s) => {
        if (s === this.state) void this.rebuild('behind-pruned').catch((e) => this.opts.logger.error({ err: errMessage(e) }, 'rebuild after pruning failed'));
      },
      onCaughtUp: (s) => {
        if (s === this.state && this.opts.autoRebuild !== false) this.maybeRebuild(s);
      },
    });
    this.searches = new BatchedSearch({
      source,
      engineVersion,
      maxBatch: opts.maxBatch ?? 32,
      refineFactor: opts.refineFactor ?? 4,
      stats,
      withAppliedAtLeast: (minSeq, fn) => this.withAppliedAtLeast(minSeq, fn),
    });
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
    await this.loader.open();
    const s = await this.loader.load('start');
    await this.catchUp.request(s);
    this.state = s;
    this.watchRowsCheck(s);
    this.syncedAt = Date.now();
    // A snapshot older than an erasure (written before it, kept while this replica was stopped, so
    // outside the erasure's receipt) is rewritten and deleted before anything else: it may hold an
    // erased vector, which must not outlive the receipt on any disk this replica owns.
    if (this.snapshots) await this.eraseFromSnapshots({ includeReceipted: true });
    await this.report(true);
    if (this.opts.syncIntervalMs > 0) {
      this.every(this.opts.syncIntervalMs, async () => {
        if (this.state) await this.catchUp.request(this.state);
        this.syncedAt = Date.now();
        await this.report(false);
      });
    }
    if ((this.opts.pruneIntervalMs ?? 0) > 0) this.every(this.opts.pruneIntervalMs!, () => this.prune().then(() => {}));
    if (this.snapshots) {
      // A third of the erasure deadline: a snapshot rewrite (seconds at 1M) fits twice in what is left.
      const ms = Math.max(200, Math.min(60_000, ((this.opts.erasureMaxSeconds ?? 300) * 1000) / 3));
      this.every(ms, () => this.eraseFromSnapshots().then(() => {}));
    }
  }

  /**
   * Erasure on disk: when an erased user's removal (erasures table) is newer than this replica's
   * snapshot, the snapshot still holds their vector. Writes a new snapshot past the removal (live
   * rows only), deletes every older one, reports the new snapshot seq, and completes the erasures
   * that no replica holds any more (the `user.erased` receipt). Returns whether it rewrote.
   * `includeReceipted` (at start): erasures already receipted count too, for the snapshots a stopped
   * replica kept.
   */
  async eraseFromSnapshots(opts: { includeReceipted?: boolean } = {}): Promise<boolean> {
    const s = this.state;
    if (!this.snapshots || !s || s.invalid || s.snapshotSeq === null) return false;
    const pending = opts.includeReceipted ? await this.erasures.oldestAfter(s.snapshotSeq) : await this.erasures.oldestPendingAfter(s.snapshotSeq);
    if (pending === null) {
      await this.erasures.completeCovered();
      return false;
    }
    if (pending > s.appliedSeq) await this.catchUp.request(s);
    await this.rebuild(this.loader.buildsFromOwnState ? 'compact' : 'full');
    const next = this.state;
    if (next?.snapshotDir) await this.loader.retireSnapshots(next.snapshotDir, 1);
    await this.report(true);
    const done = await this.erasures.completeCovered();
    this.opts.logger.info({ snapshotSeq: String(next?.snapshotSeq ?? ''), erasuresCompleted: done.length }, 'snapshot rewritten for erasure');
    return true;
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
    this.searches.rejectWaiting(new Error('the search replica is stopping'));
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

  // ---- rebuilds ---------------------------------------------------------------------------------

  private maybeRebuild(s: ReplicaState): void {
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
    this.rebuilding ??= this.buildNext(reason)
      .then((next) => this.swapIn(next))
      .finally(() => {
        this.rebuilding = undefined;
      });
    return this.rebuilding;
  }

  /** The next state, built and caught up beside the serving one. */
  private async buildNext(reason: string): Promise<ReplicaState> {
    const current = this.state;
    let next: ReplicaState;
    if (current && !current.invalid && this.loader.buildsFromOwnState && reason !== 'full') {
      next = await this.loader.fromOwnState(current, reason);
    } else {
      next = reason === 'full' ? await this.loader.fullBuild(reason) : await this.loader.load(reason);
    }
    await this.catchUp.request(next);
    if (next.invalid) throw new Error('the rebuilt index fell behind the pruned change log');
    return next;
  }

  /**
   * Follows the background authentication of a serving state's snapshot rows
   * (SEARCH_SNAPSHOT_CHECK=background): its end goes into the stats, a damaged row to `damaged`.
   */
  private watchRowsCheck(s: ReplicaState): void {
    const checked = s.engine.rowsChecked;
    if (!checked) return;
    const t0 = performance.now();
    this.stats.rowsCheck = { dir: s.snapshotDir, state: 'running', ms: null };
    checked.then(
      () => {
        // A state swapped out meanwhile closed its store, which ends the check early: nothing to report.
        if (this.state !== s) return;
        this.stats.rowsCheck = { dir: s.snapshotDir, state: 'passed', ms: elapsed(t0) };
        this.opts.logger.info({ dir: s.snapshotDir, ms: elapsed(t0) }, 'snapshot rows authenticated');
      },
      (e: unknown) => {
        if (this.state === s) this.stats.rowsCheck = { dir: s.snapshotDir, state: 'failed', ms: elapsed(t0) };
        this.damaged(s, e);
      },
    );
  }

  /**
   * A row of the snapshot `s` serves from did not authenticate (a search read it, or the background
   * check did): the snapshot is dropped and, if `s` still serves, it stops answering and the index
   * is loaded again (an older snapshot, or a full build from PostgreSQL).
   */
  private damaged(s: ReplicaState, e: unknown): void {
    if (s.snapshotDir) this.loader.dropDamaged(s.snapshotDir, errMessage(e));
    if (this.state !== s || s.invalid || this.stopped) return;
    s.invalid = true;
    this.opts.logger.error({ err: errMessage(e), dir: s.snapshotDir }, 'snapshot row does not authenticate; loading the index again');
    void this.rebuild('damaged-snapshot').catch((err) => this.opts.logger.error({ err: errMessage(err) }, 'rebuild after a damaged snapshot failed'));
  }

  /** Serves `next` from now on and closes the engine it replaces (or `next`'s own, when stopping). */
  private async swapIn(next: ReplicaState): Promise<void> {
    if (this.stopped) {
      next.engine.close();
      return;
    }
    const old = this.state;
    this.state = next;
    this.watchRowsCheck(next);
    if (old && old.engine !== next.engine) old.engine.close();
    await this.report(true).catch(() => {});
    if (next.snapshotDir) void this.loader.retireSnapshots(next.snapshotDir);
  }

  /** Writes a snapshot of the current state now (it also becomes the serving index). */
  snapshot(): Promise<void> {
    return this.rebuild('fold');
  }

  /**
   * Runs `fn` on a state that has applied at least `minSeq`, in the same synchronous step as the
   * check (a swap or a later change cannot slip in between).
   */
  async withAppliedAtLeast<T>(minSeq: bigint, fn: (s: ReplicaState) => T): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const s = this.state;
      if (!s) throw new Error('the index is not built yet');
      if (s.invalid) {
        if (attempt >= 5) throw new Error('the index is being rebuilt (the change log was pruned past it, or its snapshot was damaged)');
        await (this.rebuilding ?? this.rebuild('behind-pruned'));
        continue;
      }
      if (s.appliedSeq >= minSeq) {
        try {
          return fn(s);
        } catch (e) {
          // A re-rank row of the serving snapshot no longer authenticates (the file was altered after
          // it was opened): this search fails, and the index is loaded again (the damaged snapshot is
          // refused at open: an older one, or a full build from PostgreSQL).
          if (e instanceof SnapshotRowsDamagedError) this.damaged(s, e);
          throw e;
        }
      }
      if (attempt >= 3) {
        throw new Error(`change seq ${minSeq} is not in the change log (applied ${s.appliedSeq}): the API and this worker use different databases?`);
      }
      try {
        await this.catchUp.request(s);
      } catch (e) {
        // A catch-up of a state that was swapped out meanwhile may fail (its engine is closed):
        // retry on the new state; a failure of the serving state's catch-up is the caller's error.
        if (this.state === s) throw e;
      }
    }
  }

  // ---- searching --------------------------------------------------------------------------------

  /** The `knn` op: the k best live users for `embedding`, after applying every change up to `minSeq`. */
  knn(embedding: ArrayLike<number>, k: number, minSeq: string, excludeUserId: string | null = null): Promise<Extract<SearchResult, { op: 'knn' }>> {
    return this.searches.knn(embedding, k, minSeq, excludeUserId);
  }

  /** The `compare` op: cosine with the user's canonical embedding, read from PostgreSQL (always current). */
  compare(embedding: ArrayLike<number>, userId: string): Promise<Extract<SearchResult, { op: 'compare' }>> {
    return this.searches.compare(embedding, userId);
  }

  /**
   * Whether the background sync read the change log within `ms`: false while this replica's link to
   * PostgreSQL does not answer (its host cut off, or back from a cut on a connection that is still
   * dead), when a search it took would wait for a catch-up until its deadline. Always true without
   * a background sync.
   */
  syncedWithin(ms: number): boolean {
    return this.opts.syncIntervalMs <= 0 || Date.now() - this.syncedAt <= ms;
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
      // The serving snapshot's rows being authenticated beside it (SEARCH_SNAPSHOT_CHECK=background).
      snapshotRowsCheck: this.stats.rowsCheck ? { state: this.stats.rowsCheck.state, ms: this.stats.rowsCheck.ms } : null,
      batches: { calls: this.stats.batches, searches: this.stats.batchedSearches, largest: this.stats.largestBatch },
      prunedThrough: this.stats.pruned.through,
    };
  }
}
