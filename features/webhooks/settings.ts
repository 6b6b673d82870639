/**
 * The webhooks wing's settings (`config.webhooks`), composed into the configuration by its manifest
 * (docs/configuration.md is generated from them), and the parsers of the two list settings.
 */
import { isIP } from 'node:net';
import { s, type Parsed, type WingSettingGroup } from '../../platform/config.js';

export const WEBHOOK_SETTINGS = {
  retryScheduleSeconds: s({
    env: 'WEBHOOK_RETRY_SCHEDULE_SECONDS',
    kind: 'string',
    default: '5,300,1800,7200,18000,36000,36000',
    doc: 'Waits (seconds, comma-separated) before each retry of a webhook delivery that did not get a 2xx; each wait gets ±10% jitter; after the last retry fails the delivery is `failed` (docs/webhooks.md).',
  }),
  timeoutMs: s({
    env: 'WEBHOOK_TIMEOUT_MS',
    kind: 'int',
    default: 15_000,
    min: 100,
    doc: 'Timeout of one webhook delivery attempt (connect, send, answer); beyond it the attempt failed and is retried.',
  }),
  secretOverlapSeconds: s({
    env: 'WEBHOOK_SECRET_OVERLAP_SECONDS',
    kind: 'int',
    default: 86_400,
    min: 0,
    doc: 'After a webhook secret rotation, how long deliveries are signed with the old secret as well as the new one.',
  }),
  allowPrivate: s({
    env: 'WEBHOOK_ALLOW_PRIVATE',
    kind: 'bool',
    default: (c: Parsed) => c.runtime?.nodeEnv !== 'production',
    doc: 'Allow webhook endpoints on http and on private, loopback or link-local addresses (default: outside production only; refused in production, where WEBHOOK_PRIVATE_CIDRS names the private receivers instead). Off: only https to public addresses, checked against what the name resolves to when each attempt is sent, redirects not followed (docs/security.md).',
  }),
  privateCidrs: s({
    env: 'WEBHOOK_PRIVATE_CIDRS',
    kind: 'string',
    default: '',
    doc: 'Private networks webhook endpoints may reach although WEBHOOK_ALLOW_PRIVATE is off, as `address/prefix,address/prefix,...` (e.g. `10.20.0.0/16,fd00:20::/32`): the explicit allow-list for receivers inside your own network. Still https only, still checked against what the name resolves to at each attempt. Empty: public addresses only.',
  }),
  retentionDays: s({
    env: 'WEBHOOK_RETENTION_DAYS',
    kind: 'int',
    default: 30,
    min: 1,
    doc: 'Webhook events older than this, with no delivery still pending, are deleted with their deliveries and delivery log (by the retention sweep, every RETENTION_SWEEP_INTERVAL_SECONDS); a purged event can no longer be replayed.',
  }),
  dispatchIntervalMs: s({
    env: 'WEBHOOK_DISPATCH_INTERVAL_MS',
    kind: 'int',
    default: 1000,
    min: 50,
    doc: 'Period at which the webhook dispatcher scans the event outbox and the due deliveries (PostgreSQL) and queues their attempts; also how soon deliveries resume after a Redis outage.',
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    webhooks: typeof WEBHOOK_SETTINGS;
  }
}

export const webhookSettingGroups: Record<string, WingSettingGroup> = {
  webhooks: {
    title: 'Webhooks',
    settings: WEBHOOK_SETTINGS,
    check({ isProduction, webhooks }, problems) {
      if (isProduction && webhooks.allowPrivate)
        problems.push('WEBHOOK_ALLOW_PRIVATE=true is refused in production: name the private receivers in WEBHOOK_PRIVATE_CIDRS instead');
      for (const cidr of splitList(String(webhooks.privateCidrs))) {
        if (parseCidr(cidr) === undefined)
          problems.push(`WEBHOOK_PRIVATE_CIDRS=${JSON.stringify(webhooks.privateCidrs)}: expected address/prefix,address/prefix,...`);
      }
      if (parseRetrySchedule(String(webhooks.retryScheduleSeconds)) === undefined)
        problems.push('WEBHOOK_RETRY_SCHEDULE_SECONDS must be comma-separated non-negative numbers of seconds');
    },
  },
};

function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
}

/** One `address/prefix` of WEBHOOK_PRIVATE_CIDRS; undefined when malformed. */
export function parseCidr(raw: string): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  const m = /^([^/\s]+)\/(\d{1,3})$/.exec(raw.trim());
  if (!m) return undefined;
  const family = isIP(m[1]!);
  const prefix = Number(m[2]);
  if (family === 0 || prefix > (family === 4 ? 32 : 128)) return undefined;
  return { address: m[1]!, prefix, family: family === 4 ? 'ipv4' : 'ipv6' };
}

/** WEBHOOK_PRIVATE_CIDRS as networks (the malformed ones were refused at load). */
export function parsePrivateCidrs(raw: string): Array<{ address: string; prefix: number; family: 'ipv4' | 'ipv6' }> {
  return splitList(raw).flatMap((c) => parseCidr(c) ?? []);
}

/** WEBHOOK_RETRY_SCHEDULE_SECONDS as seconds; undefined when malformed (an empty value: no retry). */
export function parseRetrySchedule(raw: string): number[] | undefined {
  if (raw.trim() === '') return [];
  const waits = raw.split(',').map((p) => Number(p.trim()));
  return waits.every((w) => Number.isFinite(w) && w >= 0) ? waits : undefined;
}
