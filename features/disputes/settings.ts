/** The disputes wing's settings (`config.disputes`), composed into the configuration by its manifest. */
import { s, type WingSettingGroup } from '../../platform/config.js';

export const DISPUTE_SETTINGS = {
  retentionDays: s({
    env: 'RETENTION_DAYS_DISPUTES',
    kind: 'int',
    default: 2190,
    min: 1,
    doc: 'Days a resolved or rejected dispute is kept after its last change (6 years: the limitation period for a contract claim). Open disputes are never purged.',
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    disputes: typeof DISPUTE_SETTINGS;
  }
}

export const disputeSettingGroups: Record<string, WingSettingGroup> = {
  disputes: { title: 'Disputes', settings: DISPUTE_SETTINGS },
};
