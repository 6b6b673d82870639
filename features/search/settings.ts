/**
 * The search wing's settings (`config.search`), composed into the configuration by its manifest. The
 * manifest's `processes` sizes the floor's process list (platform/processes/process-list.ts) from
 * SEARCH_PROCESSES and SEARCH_SHARDS: how many search processes `npm start` runs.
 */
import { s, type Parsed, type WingSettingGroup } from '../../platform/config.js';

export const SEARCH_SETTINGS = {
  processes: s({
    env: 'SEARCH_PROCESSES',
    kind: 'int',
    default: 2,
    min: 1,
    max: 16,
    doc: '`search` processes (replicas) `npm start` runs. With 2, the death of one is no outage: the other serves while the supervisor restarts it (docs/reliability.md); each holds its own copy of the index codes and ids (about 190 MiB at 1M, docs/vector-index.md). The first answers `/health` on SEARCH_HEALTH_PORT, the others on a free port each.',
  }),
  healthPort: s({
    env: 'SEARCH_HEALTH_PORT',
    kind: 'int',
    default: 3101,
    min: 0,
    max: 65535,
    doc: "Port of the search worker's `/health` (index size and applied change sequence).",
  }),
  healthUrl: s({
    env: 'SEARCH_HEALTH_URL',
    kind: 'url',
    default: (c: Parsed) => `http://127.0.0.1:${c.search?.healthPort}`,
    doc: "Where the API reaches a search worker's `/health`.",
  }),
  indexFactory: s({
    env: 'VECTOR_INDEX_FACTORY',
    kind: 'string',
    default: 'BinarySketch512',
    doc: 'Index type: `BinarySketch<bits>` (binary codes in memory, Hamming scan, exact re-rank; the default, docs/vector-index.md) or any FAISS factory string (inner product), e.g. `Flat`, `IVF1024,SQ8`.',
  }),
  indexNprobe: s({
    env: 'VECTOR_INDEX_NPROBE',
    kind: 'int',
    default: 32,
    min: 1,
    max: 65536,
    doc: 'Inverted lists probed per query by IVF index types (speed/recall trade-off; see docs/vector-index.md).',
  }),
  syncIntervalMs: s({
    env: 'SEARCH_SYNC_INTERVAL_MS',
    kind: 'int',
    default: 1000,
    min: 0,
    doc: "Period of a search worker's background catch-up from the change log (0: only when a search needs it).",
  }),
  workerConcurrency: s({
    env: 'SEARCH_WORKER_CONCURRENCY',
    kind: 'int',
    default: 16,
    min: 1,
    max: 64,
    doc: 'Search jobs one search worker holds at once (searches that are waiting together go to the index in one call, up to SEARCH_MAX_BATCH).',
  }),
  snapshotDir: s({
    env: 'SEARCH_SNAPSHOT_DIR',
    kind: 'string',
    default: 'var/search-snapshots',
    doc: 'Where search replicas keep index snapshots (a replica starts from the newest valid one plus the changes after it; see docs/vector-index.md).',
  }),
  snapshotCheck: s({
    env: 'SEARCH_SNAPSHOT_CHECK',
    kind: 'string',
    enum: ['background', 'before-serving'] as const,
    default: 'background',
    doc: 'When a replica that starts from a snapshot authenticates every sealed re-rank row of it (the whole rows file read and decrypted: about 20 GB at 10M). `background`: it serves as soon as the codes and ids are in memory, the check runs beside it at the lowest CPU priority; a search authenticates every row it reads in any case, so a damaged row fails that search and is never used, and a damaged snapshot found either way is deleted and the index loaded again (docs/vector-index.md, "Cold start"). `before-serving`: the replica answers only once every row has passed (a 10M start then waits for the whole file).',
  }),
  rerankCandidates: s({
    env: 'SEARCH_RERANK_CANDIDATES',
    kind: 'int',
    default: 2000,
    min: 10,
    max: 100_000,
    doc: 'Candidates a `BinarySketch` index takes from its Hamming scan per query (recall/speed trade-off; docs/vector-index.md).',
  }),
  exactCandidates: s({
    env: 'SEARCH_EXACT_CANDIDATES',
    kind: 'int',
    default: 200,
    min: 0,
    max: 100_000,
    doc: 'Of the Hamming candidates, how many a `BinarySketch` index re-ranks exactly (float32 reads) after ordering them by the asymmetric estimate; 0: all of them (docs/vector-index.md).',
  }),
  maxBatch: s({
    env: 'SEARCH_MAX_BATCH',
    kind: 'int',
    default: 32,
    min: 1,
    max: 1024,
    doc: 'Most `knn` searches a search worker sends to the index in one call (micro-batching).',
  }),
  retrainGrowth: s({
    env: 'SEARCH_RETRAIN_GROWTH',
    kind: 'number',
    default: 2,
    min: 1.1,
    max: 100,
    doc: 'An index type that needs training is retrained (in the background) once the population exceeds this factor times the rows it was trained on.',
  }),
  pruneIntervalMs: s({
    env: 'SEARCH_PRUNE_INTERVAL_MS',
    kind: 'int',
    default: 60_000,
    min: 0,
    doc: 'Period at which a search worker prunes change-log rows every live replica (and snapshot) has applied (0: never).',
  }),
  replicaStaleMs: s({
    env: 'SEARCH_REPLICA_STALE_MS',
    kind: 'int',
    default: 600_000,
    min: 1000,
    doc: 'A replica whose position is older than this no longer holds back change-log pruning (it rebuilds if it comes back behind the pruned point).',
  }),
  shards: s({
    env: 'SEARCH_SHARDS',
    kind: 'int',
    default: 1,
    min: 1,
    max: 64,
    doc: 'Shards of the gallery, split by a hash of the user id (docs/vector-index.md, "Shards"). With more than 1, each search process holds only its shard (SEARCH_SHARD), a search is broadcast to every shard and their exact top-k merged; `npm start` runs one search process per shard. The web processes and the search processes of one shard set must agree on it.',
  }),
  shard: s({
    env: 'SEARCH_SHARD',
    kind: 'int',
    default: 0,
    min: 0,
    max: 63,
    doc: 'The shard a search process holds (0 to SEARCH_SHARDS - 1); ignored with one shard.',
  }),
  shardTimeoutMs: s({
    env: 'SEARCH_SHARD_TIMEOUT_MS',
    kind: 'int',
    default: 2000,
    min: 50,
    max: 60_000,
    doc: 'With shards, how long a search waits for every shard: a shard with no replica answering by then makes the search a 503 `dependency_unavailable` with Retry-After, never a list that misses a shard.',
  }),
  erasureMaxSeconds: s({
    env: 'ERASURE_MAX_SECONDS',
    kind: 'int',
    default: 300,
    min: 1,
    doc: "Longest time a deleted user's template may stay in a search snapshot on disk: each search worker rewrites its snapshot (and removes the older ones) within this after a deletion.",
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    search: typeof SEARCH_SETTINGS;
  }
}

export const searchSettingGroups: Record<string, WingSettingGroup> = {
  search: { title: 'Search replicas (1:N index)', settings: SEARCH_SETTINGS },
};
