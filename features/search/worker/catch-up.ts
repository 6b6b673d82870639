/**
 * Keeps a replica state in step with the change log (docs/vector-index.md): read the changes after
 * `appliedSeq` (seq order, in batches), fetch the CURRENT rows of the users they name, apply them (row
 * present: upsert; absent: remove), advance `appliedSeq`. Applying current state is idempotent;
 * features/face/embeddings-repository.ts makes seqs commit in order, so nothing can appear later below
 * `appliedSeq`. If the log was pruned past `appliedSeq` (the replica was away), the state is marked
 * invalid: it must not answer again, and the replica rebuilds.
 */
import type { Change, ChangeLogSource } from './change-log-source.js';
import type { ReplicaState, ReplicaStats } from './replica-state.js';

export interface CatchUpOptions {
  source: ChangeLogSource;
  engineVersion: string;
  /** Changes read per round trip. */
  changeBatch: number;
  stats: ReplicaStats;
  /** The state fell behind the pruned log (now invalid). */
  onPrunedPast(s: ReplicaState): void;
  /** A catch-up of the state finished (compaction and the like may follow). */
  onCaughtUp(s: ReplicaState): void;
}

export class CatchUp {
  constructor(private readonly opts: CatchUpOptions) {}

  /**
   * Resolves once a catch-up that STARTED AFTER this call has finished, so it has seen every change
   * committed before the call. Concurrent callers share runs.
   */
  request(s: ReplicaState): Promise<void> {
    if (s.queued) return s.queued;
    const run = () => {
      const p = this.run(s).finally(() => {
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

  private async run(s: ReplicaState): Promise<void> {
    const { source, changeBatch, stats } = this.opts;
    stats.catchUps++;
    for (;;) {
      const { prunedThrough, changes } = await source.changesAfter(s.appliedSeq, changeBatch);
      if (prunedThrough > s.appliedSeq) {
        // Changes this state never saw were deleted: it must not answer again.
        s.invalid = true;
        this.opts.onPrunedPast(s);
        return;
      }
      if (changes.length === 0) break;
      await this.apply(s, changes);
      stats.changesApplied += changes.length;
      if (changes.length < changeBatch) break;
    }
    this.opts.onCaughtUp(s);
  }

  /** Applies the current rows of the users a batch of changes names, then advances `appliedSeq`. */
  private async apply(s: ReplicaState, changes: Change[]): Promise<void> {
    const ids = [...new Set(changes.map((c) => c.userId))];
    const current = await this.opts.source.currentRows(ids, this.opts.engineVersion);
    // Synchronous from here: no search sees a half-applied batch.
    const upserts: { userId: string; vector: Float32Array }[] = [];
    for (const id of ids) {
      const v = current.get(id);
      if (v) upserts.push({ userId: id, vector: v });
      else s.engine.remove(id);
    }
    s.engine.upsertMany(upserts);
    s.appliedSeq = changes[changes.length - 1]!.seq;
  }
}
