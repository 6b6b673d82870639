/**
 * Date ranges, parsed and applied in one place: `?from&to` of the reports (disputes list, analytics, billing): each an ISO date (`2026-11-01`, the
 * whole UTC day) or an ISO date-time with offset (that instant). Both ends are inclusive; internally
 * the range is [start, endExclusive). `from` after `to` is 400 `validation_failed`.
 */
import { AppError } from '../errors.js';

/** A time range as the queries apply it: [start, endExclusive), either end unbounded when null. */
export interface DateRange {
  /** null: unbounded. */
  start: Date | null;
  endExclusive: Date | null;
  /** As the caller sent them (null when absent). */
  from: string | null;
  to: string | null;
}

/** Applies a range to a timestamp column of a knex query. */
export function whereInRange<Q extends { where: (...a: any[]) => Q }>(q: Q, column: string, r: DateRange): Q {
  if (r.start) q = q.where(column, '>=', r.start);
  if (r.endExclusive) q = q.where(column, '<', r.endExclusive);
  return q;
}

/** 400 `validation_failed` on one query parameter, in the envelope the request validator uses. */
const invalidQuery = (path: string, message: string) =>
  new AppError('validation_failed', 'The request is not valid', { details: { errors: [{ in: 'query', path, message }] } });

const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;

function parseEnd(value: string, end: 'from' | 'to'): Date {
  if (DATE_ONLY.test(value)) {
    const d = new Date(`${value}T00:00:00.000Z`);
    return end === 'from' ? d : new Date(d.getTime() + DAY_MS);
  }
  const d = new Date(value);
  return end === 'from' ? d : new Date(d.getTime() + 1);
}

export function parseDateRange(from: string | undefined, to: string | undefined): DateRange {
  const start = from ? parseEnd(from, 'from') : null;
  const endExclusive = to ? parseEnd(to, 'to') : null;
  for (const [name, v, d] of [
    ['from', from, start],
    ['to', to, endExclusive],
  ] as const) {
    if (v && d && Number.isNaN(d.getTime())) throw invalidQuery(`/${name}`, 'is not a valid ISO date');
  }
  if (start && endExclusive && start.getTime() >= endExclusive.getTime()) {
    throw invalidQuery('/from', 'must not be after to');
  }
  return { start, endExclusive, from: from ?? null, to: to ?? null };
}

/** The UTC calendar day (YYYY-MM-DD) of an instant. */
export const utcDay = (d: Date) => d.toISOString().slice(0, 10);

/** The current UTC calendar month as a range (the billing default). */
export function currentMonth(now = new Date()): DateRange {
  const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const endExclusive = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
  return { start, endExclusive, from: utcDay(start), to: utcDay(new Date(endExclusive.getTime() - DAY_MS)) };
}

/** The longest range the analytics reports take (10 years of days): beyond it 400, not a silent cut. */
export const ANALYTICS_MAX_RANGE_DAYS = 3660;

/**
 * 400 `validation_failed` when the range spans more than `maxDays` UTC days (an open end counts up to
 * `now`, an open start from the data's first day, checked by the report itself).
 */
export function assertRangeWithin(range: DateRange, maxDays = ANALYTICS_MAX_RANGE_DAYS, now = new Date()): void {
  if (!range.start) return;
  const end = range.endExclusive ?? now;
  const days = Math.ceil((end.getTime() - range.start.getTime()) / DAY_MS);
  if (days > maxDays) {
    throw invalidQuery(range.from ? '/from' : '/to', `the range spans ${days} days; at most ${maxDays} days (narrow from/to)`);
  }
}
