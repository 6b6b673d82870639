/**
 * Administrators' analytics over SearchLog. These are PROXIES read from what the service logged, not
 * calibrated false-accept / false-reject rates: nobody has labelled the probes, so a `match` is only
 * what the engine decided, and a dispute is only a consumer's claim. The response says so in `label`.
 *
 * - accuracy: per endpoint (identify, verify_self), the count and share of each outcome, and the
 *   disputed-match rate = match entries with at least one dispute / match entries (a false-accept proxy).
 * - volume: per UTC day, per endpoint, the number of calls and their outcomes.
 * Both take the optional `?from&to` range on the entry's creation time.
 */
import type { SearchLogsRepository } from '../verification/index.js';
import { ANALYTICS_MAX_RANGE_DAYS, assertRangeWithin, utcDay, type DateRange } from '../../platform/lists/date-range.js';

export const ENDPOINTS = ['identify', 'verify_self'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];
/** The documented face outcomes (SPEC section 3), always listed, zero when absent. */
export const KNOWN_OUTCOMES = ['match', 'no_match', 'liveness_failed', 'no_face'] as const;

export const PROXY_LABEL =
  'Proxies, not calibrated false-accept or false-reject rates: outcomes are what the engine decided on unlabelled probes, and disputedMatchRate counts consumer disputes of matches (claims, not verified errors).';

const MAX_FILLED_DAYS = ANALYTICS_MAX_RANGE_DAYS;

const ratio = (n: number, d: number): number | null => (d === 0 ? null : Math.round((n / d) * 10_000) / 10_000);

function emptyOutcomes(): Record<string, number> {
  return Object.fromEntries(KNOWN_OUTCOMES.map((o) => [o, 0]));
}

export interface EndpointAccuracy {
  total: number;
  outcomes: Record<string, { count: number; rate: number | null }>;
  matchEntries: number;
  disputedMatchEntries: number;
  disputedMatchRate: number | null;
}

export class AnalyticsService {
  constructor(private readonly deps: { searchLogs: SearchLogsRepository }) {}

  async accuracy(range: DateRange) {
    const rows = await this.deps.searchLogs.outcomeCounts(ENDPOINTS, range);
    const endpoints = {} as Record<Endpoint, EndpointAccuracy>;
    let allMatches = 0;
    let allDisputed = 0;
    for (const ep of ENDPOINTS) {
      const mine = rows.filter((r) => r.kind === ep);
      const counts = emptyOutcomes();
      for (const r of mine) counts[r.outcome] = (counts[r.outcome] ?? 0) + Number(r.n);
      const total = Object.values(counts).reduce((a, b) => a + b, 0);
      const matchEntries = counts.match ?? 0;
      const disputedMatchEntries = mine.filter((r) => r.outcome === 'match').reduce((a, r) => a + Number(r.disputed), 0);
      allMatches += matchEntries;
      allDisputed += disputedMatchEntries;
      endpoints[ep] = {
        total,
        outcomes: Object.fromEntries(Object.entries(counts).map(([o, count]) => [o, { count, rate: ratio(count, total) }])),
        matchEntries,
        disputedMatchEntries,
        disputedMatchRate: ratio(disputedMatchEntries, matchEntries),
      };
    }
    return {
      from: range.from,
      to: range.to,
      proxy: true as const,
      label: PROXY_LABEL,
      endpoints,
      matchEntries: allMatches,
      disputedMatchEntries: allDisputed,
      disputedMatchRate: ratio(allDisputed, allMatches),
    };
  }

  async volume(range: DateRange) {
    const rows = (await this.deps.searchLogs.dailyOutcomeCounts(ENDPOINTS, range)) as { day: string; kind: Endpoint; outcome: string; n: string }[];

    type DayEntry = { date: string; total: number } & Record<Endpoint, { total: number; outcomes: Record<string, number> }>;
    const newDay = (date: string): DayEntry =>
      ({ date, total: 0, identify: { total: 0, outcomes: emptyOutcomes() }, verify_self: { total: 0, outcomes: emptyOutcomes() } }) as DayEntry;
    const byDay = new Map<string, DayEntry>();
    const totals: Record<Endpoint, number> = { identify: 0, verify_self: 0 };
    for (const r of rows) {
      const d = byDay.get(r.day) ?? newDay(r.day);
      byDay.set(r.day, d);
      const n = Number(r.n);
      d[r.kind].outcomes[r.outcome] = (d[r.kind].outcomes[r.outcome] ?? 0) + n;
      d[r.kind].total += n;
      d.total += n;
      totals[r.kind] += n;
    }
    // A continuous series: every day of the asked range (or of the data's span), zero where nothing ran.
    const first = range.start ? utcDay(range.start) : rows[0]?.day;
    const last = range.endExclusive ? utcDay(new Date(range.endExclusive.getTime() - 1)) : rows[rows.length - 1]?.day;
    const days: DayEntry[] = [];
    // An open start runs from the data's first day: that span has the same maximum as an explicit range.
    if (first && last)
      assertRangeWithin(
        { ...range, start: new Date(`${first}T00:00:00Z`), endExclusive: new Date(Date.parse(`${last}T00:00:00Z`) + 86_400_000) },
        MAX_FILLED_DAYS,
      );
    if (first && last) {
      let t = Date.parse(`${first}T00:00:00Z`);
      const end = Date.parse(`${last}T00:00:00Z`);
      for (let i = 0; t <= end && i < MAX_FILLED_DAYS; i++, t += 86_400_000) {
        const date = utcDay(new Date(t));
        days.push(byDay.get(date) ?? newDay(date));
      }
    }
    return {
      from: range.from,
      to: range.to,
      timezone: 'UTC',
      days,
      totals: { ...totals, total: totals.identify + totals.verify_self },
    };
  }
}
