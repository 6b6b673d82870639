/** The verification wing's settings (`config.searchLogs`), composed into the configuration by its manifest. */
import { s, type WingSettingGroup } from '../../platform/config.js';

export const SEARCH_LOG_SETTINGS = {
  retentionDays: s({
    env: 'RETENTION_DAYS_SEARCH_LOGS',
    kind: 'int',
    default: 400,
    min: 1,
    doc: 'Days a SearchLog row is kept (billing is monthly and disputes refer to calls: 13 months covers a year of invoices and their disputes). Purged by the retention job.',
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    searchLogs: typeof SEARCH_LOG_SETTINGS;
  }
}

export const verificationSettingGroups: Record<string, WingSettingGroup> = {
  searchLogs: { title: 'Search logs', settings: SEARCH_LOG_SETTINGS },
};
