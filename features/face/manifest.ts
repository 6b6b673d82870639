/** The face wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { faceSettingGroups } from './settings.js';

export const faceWing = defineWing({
  name: 'face',
  settings: faceSettingGroups,
  tables: ['canonical_embeddings', 'embedding_changes'],
});
