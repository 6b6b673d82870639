/** The dedupe wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { dedupeDataFamilies } from './data-families.js';
import { DEDUPE_METRICS } from './metrics.js';
import { CASE_CAPTURES, WATCHLIST_TEMPLATES } from './sealed-families.js';
import { dedupeSettingGroups } from './settings.js';

export const dedupeWing = defineWing({
  name: 'dedupe',
  routes: () => import('./routes.js').then((m) => m.default),
  settings: dedupeSettingGroups,
  tables: ['dedupe_cases', 'watchlist_entries'],
  reads: [
    { table: 'users', reason: 'a case under review shows the account it names (name, phone, linked numbers) in one query; read-only' },
    { table: 'nin_links', reason: "the same query: the account's linked NIN" },
    { table: 'bvn_links', reason: "the same query: the account's linked BVN" },
  ],
  metrics: Object.values(DEDUPE_METRICS),
  sealedFamilies: [WATCHLIST_TEMPLATES, CASE_CAPTURES],
  dataFamilies: ({ db, config }) => dedupeDataFamilies(db, { captures: config.dedupe.captureRetentionDays }),
});
