/** The search wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';

export const searchWing = defineWing({
  name: 'search',
  tables: ['search_state', 'search_replicas'],
  reads: [
    {
      table: 'canonical_embeddings',
      reason:
        "the index follows the face wing's templates by a streaming cursor in the search worker (features/search/worker/change-log-source.ts): a call per row through the face wing would cost a hop per template at catch-up; read-only, the face wing writes them",
    },
    { table: 'embedding_changes', reason: 'the change log the index replays in order (same cursor); read-only' },
  ],
});
