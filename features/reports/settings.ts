/** The reports wing's settings (`config.billing`), composed into the configuration by its manifest. */
import { s, type WingSettingGroup } from '../../platform/config.js';

export const BILLING_SETTINGS = {
  tiersFile: s({
    env: 'BILLING_TIERS_FILE',
    kind: 'string',
    default: 'config/billing-tiers.json',
    doc: 'Static contracted-tier file of the billing report.',
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    billing: typeof BILLING_SETTINGS;
  }
}

export const reportSettingGroups: Record<string, WingSettingGroup> = {
  billing: { title: 'Billing', settings: BILLING_SETTINGS },
};
