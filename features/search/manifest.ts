/** The search wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { searchSettingGroups } from './settings.js';

/*
 * The index follows the face wing's templates straight from PostgreSQL (features/search/worker/
 * change-log-source.ts, every statement in one file) rather than through the face wing's repository:
 * a replica reads the change-log head and the rows in one REPEATABLE READ snapshot, and joins its own
 * search_state to the log in one statement; a call per batch through another wing's module would
 * split that snapshot. The face wing writes both tables; search only reads them, and prunes the log
 * below what every live replica has applied.
 */
declare module '../../platform/keys/key-ring.js' {
  interface KeyPurposes {
    snapshots: true;
  }
}

export const searchWing = defineWing({
  name: 'search',
  settings: searchSettingGroups,
  tables: ['search_state', 'search_replicas'],
  reads: [
    { table: 'canonical_embeddings', reason: 'the templates the index holds, read in one snapshot with the change-log head (read-only)' },
    { table: 'embedding_changes', reason: 'the change log the replicas replay in order; pruned below what every live replica has applied' },
  ],
  keyPurposes: { snapshots: 'search snapshot files on disk' },
  processes: {
    search: {
      // With shards, one process per shard (SEARCH_SHARD = the copy's index modulo the shard count: a
      // layout that runs 2 × SEARCH_SHARDS copies runs two replicas of every shard).
      copies: (c) => (c.search.shards > 1 ? c.search.shards : c.search.processes),
      copyEnv: (c, index): Record<string, string> => (c.search.shards > 1 ? { SEARCH_SHARD: String(index % c.search.shards) } : {}),
    },
  },
  workers: { search: () => import('./worker/worker.js').then((m) => (deps) => m.startSearchWorker(deps.config, { logger: deps.logger })) },
});
