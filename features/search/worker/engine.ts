import type { SnapshotReader, SnapshotWriter } from './sealed-snapshot-files.js';

/**
 * The small interface between the engine-neutral search replica (replica.ts: change-log catch-up,
 * read-your-writes, tombstones, compaction, snapshots, micro-batching) and an index engine
 * (sketch-engine.ts: binary sketch + exact re-rank; faiss-engine.ts: a FAISS float index).
 *
 * Ids: an engine maps user ids to its own row positions; a removal or the old row of a replaced
 * vector is a tombstone (never returned), so `rows = size + dead`.
 */
export interface VectorHit {
  userId: string;
  score: number;
}

export interface EngineRow {
  userId: string;
  vector: Float32Array;
}

export interface IndexEngine {
  /** The configured factory string, and the one actually in use (they differ while untrained). */
  readonly factory: string;
  readonly effectiveFactory: string;
  /** Scores are exact cosines (else the replica re-scores the candidates from PostgreSQL). */
  readonly exact: boolean;
  readonly size: number;
  readonly dead: number;
  readonly rows: number;
  /** Rows the index was trained on (0: not trained). */
  readonly trainedOn: number;
  readonly nprobe: number | null;
  has(userId: string): boolean;
  /** Adds or replaces (last one wins within a batch); vectors are L2-normalised by the engine. */
  upsertMany(rows: readonly EngineRow[]): void;
  remove(userId: string): boolean;
  /** The k best live users per query, best first. One call for the whole batch. */
  searchMany(queries: readonly Float32Array[], k: number): VectorHit[][];
  /** Bytes held in this process for the index (codes, ids, in-memory vectors). */
  memoryBytes(): number;
  /**
   * For an engine opened from a snapshot whose rows are still being authenticated while it serves
   * (SEARCH_SNAPSHOT_CHECK=background): settles when the check ends, rejected (SnapshotRowsDamagedError)
   * when a row did not authenticate. Absent when there is nothing left to check.
   */
  readonly rowsChecked?: Promise<void>;
  close(): void;
}

/** What a full build reads first (a uniform sample, for training), and how it proceeds. */
export interface EngineBuilder {
  add(rows: readonly EngineRow[]): void;
  /** Ends the build; with snapshot support the files are in the builder's directory. */
  finish(): Promise<{ engine?: IndexEngine; engineMeta?: unknown }>;
  abort(): void;
}

/** A consistent frozen view of an engine (rows [0, rows) and which are live), for a snapshot. */
export interface FrozenEngine {
  rows: number;
  live: number;
}

export type RebuildReason = 'compact' | 'retrain' | 'fold' | null;

export interface RebuildPolicy {
  /** Retrain once the population exceeds this factor times the size it was trained at. */
  growthFactor: number;
  /** Compact when tombstones >= max(minDead, deadRatio * live rows). */
  minDead: number;
  deadRatio: number;
  /** Fold in-memory rows into a new snapshot when they reach max(foldMinRows, foldRatio * snapshot rows). */
  foldMinRows: number;
  foldRatio: number;
}

export interface EngineKind {
  readonly factory: string;
  /** Rows a full build reads first, as the training sample (0: none needed). */
  readonly sampleSize: number;
  /** Snapshots: files written into a directory (sealed under the key ring) and opened again. */
  readonly snapshots: boolean;
  /** A key that must match for a snapshot to be loaded (type and parameters). */
  readonly snapshotKey: string;
  /** An empty engine (tests, tiny populations). */
  createEmpty(): IndexEngine;
  /** A full build: `sample` trains it; with snapshots the files go into `files`. */
  startBuild(sample: readonly EngineRow[], files: SnapshotWriter | null, expectedRows: number): EngineBuilder;
  /** Why this engine should be rebuilt now, if it should. */
  rebuildReason(engine: IndexEngine, policy: RebuildPolicy): RebuildReason;
  /** Freezes the engine's current state (synchronous: pair it with the applied seq of the same step). */
  freeze?(engine: IndexEngine): FrozenEngine;
  /** Writes the frozen state (live rows only; retrained when `retrain`) into `files`; returns its metadata. */
  writeSnapshot?(engine: IndexEngine, frozen: FrozenEngine, files: SnapshotWriter, retrain: boolean): Promise<unknown>;
  /** Opens a snapshot from its decrypted files (the engine holds the plaintext in memory, never on disk). */
  openSnapshot?(files: SnapshotReader, engineMeta: unknown): Promise<IndexEngine>;
}
