/**
 * What the parts of a search replica share (replica.ts composes them: index-loader.ts builds a state,
 * catch-up.ts keeps it in step with the change log, batched-search.ts answers from it).
 */
import { performance } from 'node:perf_hooks';
import type { IndexEngine } from './engine.js';

/** One engine with the change-log position it reflects; the replica serves one and may build the next beside it. */
export interface ReplicaState {
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

/** Figures for /health and the benchmarks, counted by every part of the replica. */
export function newReplicaStats() {
  return {
    lastBuild: undefined as BuildStats | undefined,
    builds: 0,
    catchUps: 0,
    changesApplied: 0,
    otherEngineRows: 0,
    snapshotsRefused: 0,
    /** The serving snapshot's background row check (SEARCH_SNAPSHOT_CHECK=background): null before any. */
    rowsCheck: null as { dir: string | null; state: 'running' | 'passed' | 'failed'; ms: number | null } | null,
    batches: 0,
    batchedSearches: 0,
    largestBatch: 0,
    pruned: { through: '0', deleted: 0 },
  };
}

export type ReplicaStats = ReturnType<typeof newReplicaStats>;

export const elapsed = (t0: number) => Math.round((performance.now() - t0) * 10) / 10;
export const errMessage = (e: unknown) => (e instanceof Error ? e.message : String(e));
