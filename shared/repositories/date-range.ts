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
