/** The face wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';

export const faceWing = defineWing({
  name: 'face',
  tables: ['canonical_embeddings', 'embedding_changes'],
});
