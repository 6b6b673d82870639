/** The system wing's settings (`config.queueDashboard`), composed into the configuration by its manifest. */
import { s, type Parsed, type WingSettingGroup } from '../../platform/config.js';

export const QUEUE_DASHBOARD_SETTINGS = {
  readOnly: s({
    env: 'QUEUE_DASHBOARD_READ_ONLY',
    kind: 'bool',
    default: (c: Parsed) => c.runtime?.nodeEnv === 'production',
    doc: "The administrators' queue dashboard (`/admin/queues`) only shows the queues: no retry, clean, pause or promote (405). Default: on in production, where a job is a person's face on its way.",
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    queueDashboard: typeof QUEUE_DASHBOARD_SETTINGS;
  }
}

export const systemSettingGroups: Record<string, WingSettingGroup> = {
  queueDashboard: { title: "Administrators' queue dashboard", settings: QUEUE_DASHBOARD_SETTINGS },
};
