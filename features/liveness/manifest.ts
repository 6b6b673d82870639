/** The liveness wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { livenessDataFamilies } from './data-families.js';
import { LIVENESS_METRICS } from './metrics.js';
import type { LivenessSessionStore } from './session-store.js';
import { livenessSettingGroups } from './settings.js';

declare module '../../platform/keys/key-ring.js' {
  interface KeyPurposes {
    'liveness-frame-digests': true;
  }
}
declare module '../../platform/wing.js' {
  interface WingStores {
    livenessSessions: Pick<LivenessSessionStore, 'purgeUser'>;
  }
}

export const livenessWing = defineWing({
  name: 'liveness',
  routes: () => import('./routes.js').then((m) => m.default),
  settings: livenessSettingGroups,
  tables: [],
  metrics: Object.values(LIVENESS_METRICS),
  keyPurposes: { 'liveness-frame-digests': 'the keyed digests of the frames of a liveness session (a frame sent twice is recognised)' },
  dataFamilies: ({ stores }) => livenessDataFamilies(stores.livenessSessions),
});
