/** Administrators' reports: accuracy and volume analytics over SearchLog, and the billing report. */
import { Type } from '@sinclair/typebox';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { DateParam, Strict } from '../../platform/http/schemas.js';
import { PROXY_LABEL } from './analytics-service.js';
import { BILLABLE_DEFINITION } from './billing-service.js';
import { ANALYTICS_MAX_RANGE_DAYS, assertRangeWithin, currentMonth, parseDateRange, type DateRange } from '../../platform/lists/date-range.js';
import type { AnalyticsService } from './analytics-service.js';
import type { BillingService } from './billing-service.js';

const RangeQuery = Type.Object(
  {
    from: Type.Optional(DateParam('Start, inclusive: an ISO date (the whole UTC day) or an ISO date-time')),
    to: Type.Optional(DateParam('End, inclusive; must not be before from')),
  },
  Strict,
);

const OrgParams = Type.Object({ orgId: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$' }) }, Strict);

const Rate = Type.Union([Type.Number(), Type.Null()], { description: 'null when the denominator is 0' });
const EndpointAccuracy = Type.Object({
  total: Type.Integer(),
  outcomes: Type.Record(Type.String(), Type.Object({ count: Type.Integer(), rate: Rate })),
  matchEntries: Type.Integer(),
  disputedMatchEntries: Type.Integer(),
  disputedMatchRate: Rate,
});
const Period = Type.Object({ from: Type.Union([Type.String(), Type.Null()]), to: Type.Union([Type.String(), Type.Null()]) });

const AccuracyBody = Type.Object({
  from: Type.Union([Type.String(), Type.Null()]),
  to: Type.Union([Type.String(), Type.Null()]),
  proxy: Type.Literal(true),
  label: Type.String(),
  endpoints: Type.Object({ identify: EndpointAccuracy, verify_self: EndpointAccuracy }),
  matchEntries: Type.Integer(),
  disputedMatchEntries: Type.Integer(),
  disputedMatchRate: Rate,
});

const EndpointDay = Type.Object({ total: Type.Integer(), outcomes: Type.Record(Type.String(), Type.Integer()) });
const VolumeBody = Type.Object({
  from: Type.Union([Type.String(), Type.Null()]),
  to: Type.Union([Type.String(), Type.Null()]),
  timezone: Type.Literal('UTC'),
  days: Type.Array(Type.Object({ date: Type.String({ format: 'date' }), total: Type.Integer(), identify: EndpointDay, verify_self: EndpointDay })),
  totals: Type.Object({ identify: Type.Integer(), verify_self: Type.Integer(), total: Type.Integer() }),
});

const BillingBody = Type.Object({
  orgId: Type.String(),
  tier: Type.Object({ name: Type.String(), includedVolume: Type.Integer(), unitPrice: Type.Number(), overagePrice: Type.Number(), currency: Type.String() }),
  period: Period,
  currency: Type.String(),
  includedVolume: Type.Integer(),
  usage: Type.Object({ billable: Type.Integer(), notBilled: Type.Integer(), byOutcome: Type.Record(Type.String(), Type.Integer()), definition: Type.String() }),
  overage: Type.Object({ volume: Type.Integer(), unitPrice: Type.Number(), amount: Type.Number() }),
  committedAmount: Type.Number(),
  amountDue: Type.Number(),
});

/** The analytics range: at most ANALYTICS_MAX_RANGE_DAYS days, else 400 (never a silently shortened answer). */
function analyticsRange(from: string | undefined, to: string | undefined): DateRange {
  const range = parseDateRange(from, to);
  assertRangeWithin(range);
  return range;
}

const RANGE_DOC = `At most ${ANALYTICS_MAX_RANGE_DAYS} days from \`from\` to \`to\` (an open \`to\` is today; an open \`from\` is the first day with data): a longer range is 400 \`validation_failed\`.`;

export default function reportRoutes(deps: { analytics: AnalyticsService; billing: BillingService }): AnyRoute[] {
  return [
    route({
      method: 'GET',
      path: '/analytics/accuracy',
      operationId: 'getAccuracyAnalytics',
      tag: 'Analytics',
      summary: 'Outcome breakdowns per endpoint and the disputed-match rate (proxies)',
      description: `${PROXY_LABEL} ${RANGE_DOC}`,
      auth: 'administrator',
      query: RangeQuery,
      responses: { 200: { description: 'Per endpoint (identify, verify_self): outcome counts and rates; disputedMatchRate', schema: AccuracyBody } },
      handler: async function getAccuracyAnalytics({ query }) {
        return { body: await deps.analytics.accuracy(analyticsRange(query.from, query.to)) };
      },
    }),
    route({
      method: 'GET',
      path: '/analytics/volume',
      operationId: 'getVolumeAnalytics',
      tag: 'Analytics',
      summary: 'Calls per UTC day per endpoint, with their outcomes',
      description: RANGE_DOC,
      auth: 'administrator',
      query: RangeQuery,
      responses: { 200: { description: "A continuous daily series over the range (or the data's span)", schema: VolumeBody } },
      handler: async function getVolumeAnalytics({ query }) {
        return { body: await deps.analytics.volume(analyticsRange(query.from, query.to)) };
      },
    }),
    route({
      method: 'GET',
      path: '/billing/{orgId}',
      operationId: 'getBilling',
      tag: 'Billing',
      summary: 'Tier, period, included volume, usage, overage and amount due for one org',
      description: `Read-only, from the static contracted-tier file (BILLING_TIERS_FILE) and the org's usage. Period: \`?from&to\`, default the current UTC calendar month. Billable: ${BILLABLE_DEFINITION}`,
      auth: 'administrator',
      params: OrgParams,
      query: RangeQuery,
      responses: { 200: { description: 'The report', schema: BillingBody } },
      errors: ['not_found'],
      handler: async function getBilling({ params, query }) {
        const range = query.from || query.to ? parseDateRange(query.from, query.to) : currentMonth();
        return { body: await deps.billing.report(params.orgId, range) };
      },
    }),
  ];
}
