/**
 * How a search replica gets an index (docs/vector-index.md): the newest valid snapshot of this change
 * log (snapshot-store.ts: lineage, engine type and sizes checked, every frame authenticated as it is decrypted; its seq not below the
 * pruned point), or a full build from one REPEATABLE READ snapshot of PostgreSQL, which is itself
 * written as a snapshot and opened from it (so "snapshot start" and "full build" are the same index);
 * or, for compaction, fold and retraining, a new snapshot written from the replica's own state.
 * Each returns a state at the seq it reflects; the catch-up (catch-up.ts) brings it forward.
 */
import { rm } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../../../platform/logger.js';
import type { ChangeLogSource, SourceRow } from './change-log-source.js';
import type { EngineBuilder, EngineKind, IndexEngine } from './engine.js';
import { elapsed, errMessage, type BuildStats, type ReplicaState, type ReplicaStats } from './replica-state.js';
import type { Snapshot, SnapshotStore } from './snapshot-store.js';

export interface IndexLoaderOptions {
  kind: EngineKind;
  source: ChangeLogSource;
  snapshots: SnapshotStore | null;
  engineVersion: string;
  /** Rows per page when reading canonical_embeddings. */
  pageSize: number;
  logger: Logger;
  stats: ReplicaStats;
  /** The snapshot directory the serving state was opened from (kept when old snapshots are retired). */
  servingDir(): string | null;
}

export class IndexLoader {
  private logId: string | undefined;
  /** Snapshots found damaged after they were opened (SEARCH_SNAPSHOT_CHECK=background): never opened again. */
  private readonly damaged = new Set<string>();

  constructor(private readonly opts: IndexLoaderOptions) {}

  /** Reads which change log this replica follows (snapshots of another log are never opened). */
  async open(): Promise<void> {
    this.logId = await this.opts.source.logId();
  }

  /** The newest usable snapshot plus nothing else (catch-up follows), or a full build. */
  async load(reason: string): Promise<ReplicaState> {
    const fromSnapshot = await this.loadSnapshot(reason);
    return fromSnapshot ?? this.fullBuild(reason);
  }

  private async loadSnapshot(reason: string): Promise<ReplicaState | undefined> {
    const { snapshots, kind, source } = this.opts;
    if (!snapshots || !kind.openSnapshot) return undefined;
    const t0 = performance.now();
    const [list, head, pruned] = await Promise.all([snapshots.list(this.logId!, kind.snapshotKey), source.headSeq(), source.prunedThrough()]);
    for (const snap of list) {
      if (this.damaged.has(snap.dir)) continue; // counted and logged when found; its removal may still run
      const seq = BigInt(snap.meta.seq);
      const refused =
        seq > head
          ? `its seq is past the change log head ${head}`
          : seq < pruned
            ? `the change log was pruned through ${pruned}: the changes after it are gone`
            : await snapshots.verify(snap);
      if (refused) {
        this.refuse(snap, refused);
        continue;
      }
      try {
        const engine = await kind.openSnapshot(snapshots.reader(snap), snap.meta.engineMeta);
        this.noteBuild(t0, 0, engine, reason, 'snapshot', seq);
        return { engine, appliedSeq: seq, snapshotSeq: seq, snapshotDir: snap.dir };
      } catch (e) {
        this.refuse(snap, errMessage(e));
      }
    }
    return undefined;
  }

  /**
   * A snapshot a serving engine was opened from has a row that does not authenticate (found by a
   * search or by the background check): it is never opened again by this process, and deleted so that
   * no other replica or restart opens it (a snapshot is a copy of PostgreSQL's rows, never the only one).
   */
  dropDamaged(dir: string, why: string): void {
    if (this.damaged.has(dir)) return;
    this.damaged.add(dir);
    this.opts.stats.snapshotsRefused++;
    this.opts.logger.error({ dir, why }, 'snapshot refused after it was opened: deleted, the index is loaded again');
    void rm(dir, { recursive: true, force: true }).catch((e) => this.opts.logger.warn({ dir, err: errMessage(e) }, 'damaged snapshot not deleted'));
  }

  private refuse(snap: Snapshot, why: string): void {
    this.opts.stats.snapshotsRefused++;
    this.opts.logger.warn({ dir: snap.dir, seq: snap.meta.seq, why }, 'snapshot refused');
  }

  /** Reads every embedding from PostgreSQL in one consistent snapshot; with snapshots, writes one. */
  async fullBuild(reason: string): Promise<ReplicaState> {
    const { snapshots, kind, source, pageSize } = this.opts;
    const t0 = performance.now();
    let trainMs = 0;
    const draft = snapshots ? await snapshots.begin() : null;
    let builder: EngineBuilder | undefined;
    try {
      const read = await source.readAll(
        this.opts.engineVersion,
        { firstRows: Math.max(kind.sampleSize, pageSize), pageSize },
        (rows: SourceRow[], total: number) => {
          const t1 = performance.now();
          builder = kind.startBuild(rows, draft?.files ?? null, total);
          trainMs = elapsed(t1);
          for (let i = 0; i < rows.length; i += pageSize) builder.add(rows.slice(i, i + pageSize));
        },
        (rows) => builder!.add(rows),
      );
      this.opts.stats.otherEngineRows = read.otherEngineRows;
      const done = await builder!.finish();
      let engine = done.engine;
      let snap: Snapshot | undefined;
      if (draft && snapshots && kind.openSnapshot) {
        snap = await snapshots.commit(draft, {
          logId: this.logId!,
          seq: String(read.seq),
          engineKey: kind.snapshotKey,
          rows: read.rows,
          engineMeta: done.engineMeta,
        });
        engine = await kind.openSnapshot(snapshots.reader(snap), done.engineMeta);
        void this.retireSnapshots(snap.dir);
      }
      if (!engine) throw new Error('the engine build produced no index');
      this.noteBuild(t0, trainMs, engine, reason, 'postgres', snap ? read.seq : null);
      return { engine, appliedSeq: read.seq, snapshotSeq: snap ? read.seq : null, snapshotDir: snap?.dir ?? null };
    } catch (e) {
      builder?.abort();
      if (draft) await snapshots!.abort(draft);
      throw e;
    }
  }

  /** Whether this engine kind can write a snapshot from a live state (compaction, fold, retraining without PostgreSQL). */
  get buildsFromOwnState(): boolean {
    const { snapshots, kind } = this.opts;
    return !!(snapshots && kind.freeze && kind.writeSnapshot && kind.openSnapshot);
  }

  /** A new snapshot written from `s` (frozen in one synchronous step with the seq it reflects), opened. */
  async fromOwnState(s: ReplicaState, reason: string): Promise<ReplicaState> {
    const kind = this.opts.kind;
    const snapshots = this.opts.snapshots!;
    const t0 = performance.now();
    const frozen = kind.freeze!(s.engine);
    const seq = s.appliedSeq;
    const draft = await snapshots.begin();
    try {
      const engineMeta = await kind.writeSnapshot!(s.engine, frozen, draft.files, reason === 'retrain');
      const snap = await snapshots.commit(draft, { logId: this.logId!, seq: String(seq), engineKey: kind.snapshotKey, rows: frozen.live, engineMeta });
      const engine = await kind.openSnapshot!(snapshots.reader(snap), engineMeta);
      this.noteBuild(t0, 0, engine, reason, 'own-state', seq);
      return { engine, appliedSeq: seq, snapshotSeq: seq, snapshotDir: snap.dir };
    } catch (e) {
      await snapshots.abort(draft);
      throw e;
    }
  }

  /**
   * Removes old snapshots of this log and engine, keeping the `keep` newest (two: a damaged newest
   * falls back to the one before), `keepDir` and the serving one. An erasure keeps one: the older
   * snapshots hold the erased vector.
   */
  async retireSnapshots(keepDir: string, keep = 2): Promise<void> {
    if (!this.opts.snapshots) return;
    const inUse = new Set<string>([keepDir]);
    const serving = this.opts.servingDir();
    if (serving) inUse.add(serving);
    await this.opts.snapshots.retire(this.logId!, this.opts.kind.snapshotKey, keep, inUse).catch(() => 0);
  }

  private noteBuild(t0: number, trainMs: number, engine: IndexEngine, reason: string, from: BuildStats['from'], snapshotSeq: bigint | null): void {
    const stats = this.opts.stats;
    stats.builds++;
    stats.lastBuild = {
      at: new Date().toISOString(),
      ms: elapsed(t0),
      trainMs,
      rows: engine.size,
      reason,
      from,
      snapshotSeq: snapshotSeq === null ? null : String(snapshotSeq),
    };
    this.opts.logger.info(
      {
        reason,
        from,
        size: engine.size,
        factory: engine.factory,
        effectiveFactory: engine.effectiveFactory,
        ms: elapsed(t0),
        trainMs,
        snapshotSeq: snapshotSeq === null ? null : String(snapshotSeq),
      },
      'vector index ready',
    );
  }
}
