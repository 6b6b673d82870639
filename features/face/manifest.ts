/** The face wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import type { BiometricAttemptsStore } from './biometric-attempts-store.js';
import { faceDataFamilies } from './data-families.js';
import { CANONICAL_TEMPLATES } from './template-rotation.js';
import { faceSettingGroups } from './settings.js';

declare module '../../platform/wing.js' {
  interface WingStores {
    biometricAttempts: Pick<BiometricAttemptsStore, 'purgeUser'>;
  }
}

export const faceWing = defineWing({
  name: 'face',
  settings: faceSettingGroups,
  tables: ['canonical_embeddings', 'embedding_changes'],
  sealedFamilies: [CANONICAL_TEMPLATES],
  dataFamilies: ({ stores }) => faceDataFamilies(stores.biometricAttempts),
  processes: { face: { copies: (c) => c.face.processes } },
  workers: { face: () => import('./worker/worker.js').then((m) => (deps) => m.startFaceWorker(deps.config, { logger: deps.logger })) },
});
