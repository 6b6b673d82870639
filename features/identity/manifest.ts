/** The identity wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { identityDataFamilies } from './data-families.js';
import type { IdentityTokenStore } from './identity-tokens.js';
import { identitySettingGroups } from './settings.js';

declare module '../../platform/keys/key-ring.js' {
  interface KeyPurposes {
    'registry-values': true;
  }
}
declare module '../../platform/wing.js' {
  interface WingStores {
    identityTokens: Pick<IdentityTokenStore, 'purgeUser'>;
  }
}

export const identityWing = defineWing({
  name: 'identity',
  routes: () => import('./routes.js').then((m) => m.default),
  settings: identitySettingGroups,
  tables: [],
  keyPurposes: { 'registry-values': "identity registry values in Redis: a validation's record, a link token's number and registry record" },
  dataFamilies: ({ stores }) => identityDataFamilies(stores.identityTokens),
});
