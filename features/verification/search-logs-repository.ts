/**
 * SearchLog entries (one per /identify and /verify/self call) and the disputes raised on them: the
 * row shape written once, the history and report queries that read them.
 */
import type { Knex } from 'knex';
import { Dispute, Operator, SearchLog, type Candidate, type DisputeStatus, type LatencyMs } from '../../models/index.js';
import { whereInRange, type DateRange } from '../../platform/lists/date-range.js';
import { Repository, type Db } from '../../platform/database/unit-of-work.js';
import { onePage } from '../../platform/lists/paging.js';

/** What a call records; everything else of the row follows from it. */
export interface NewSearchLog {
  id?: string;
  kind: SearchLog['kind'];
  operatorId?: string | null;
  orgId?: string | null;
  userId?: string | null;
  outcome: string;
  candidates: Candidate[];
  topScore: number | null;
  latencyMs: LatencyMs;
  engineVersion?: string | null;
  errorCode?: string | null;
  /** Advisory capture quality (0..100) of the probe or selfie; null when unknown. */
  qualityScore?: number | null;
  createdAt?: Date;
}

/** The row of a SearchLog entry, as /identify and /verify/self write it. */
export function searchLogRow(row: NewSearchLog): Record<string, unknown> {
  return {
    ...(row.id ? { id: row.id } : {}),
    kind: row.kind,
    operatorId: row.operatorId ?? null,
    orgId: row.orgId ?? null,
    userId: row.userId ?? null,
    outcome: row.outcome,
    // jsonb: serialised here (the pg driver would send a JS array as a PostgreSQL array).
    candidates: JSON.stringify(row.candidates),
    matchedUserIds: row.candidates.map((c) => c.userId),
    topScore: row.topScore,
    latencyMs: JSON.stringify(row.latencyMs),
    engineVersion: row.engineVersion ?? null,
    errorCode: row.errorCode ?? null,
    qualityScore: row.qualityScore ?? null,
    ...(row.createdAt ? { createdAt: row.createdAt } : {}),
  };
}

export type HistoryKind = SearchLog['kind'];

export interface HistoryRow {
  id: string;
  kind: HistoryKind;
  outcome: string;
  createdAt: Date;
  /** Full-precision cursor for the keyset (a JS Date would drop the microseconds). */
  cursorTs: string;
  score: number | string | null;
  disputed: boolean;
}

export interface DisputeRow {
  id: string;
  searchLogId: string;
  kind: HistoryKind;
  userId: string;
  reason: string | null;
  status: DisputeStatus;
  note: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface DisputeFilter {
  status?: DisputeStatus;
  userId?: string;
  referenceId?: string;
  range: DateRange;
}

const SEARCH_LOGS = `${SearchLog.tableName} as s`;
const DISPUTES = `${Dispute.tableName} as d`;
const newestFirst = (alias?: string) => {
  const col = (c: string) => (alias ? `${alias}.${c}` : c);
  return [
    { column: col('createdAt'), order: 'desc' as const },
    { column: col('id'), order: 'desc' as const },
  ];
};

export class SearchLogsRepository extends Repository {
  // ---- search logs -------------------------------------------------------------------------

  /** Writes one entry; returns its id (the referenceId). */
  async insert(row: NewSearchLog, trx?: Db): Promise<string> {
    const [inserted] = await this.on(trx)(SearchLog.tableName).insert(searchLogRow(row)).returning('id');
    return (inserted as { id: string }).id;
  }

  /** Writes many entries (500 a statement); returns their ids in order. */
  async insertMany(rows: NewSearchLog[]): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < rows.length; i += 500) {
      const inserted: { id: string }[] = await this.db(SearchLog.tableName)
        .insert(rows.slice(i, i + 500).map(searchLogRow))
        .returning('id');
      out.push(...inserted.map((r) => r.id));
    }
    return out;
  }

  async findIdentifyForUpdate(id: string, trx: Knex.Transaction): Promise<Pick<SearchLog, 'id' | 'orgId' | 'escalatedAt'> | undefined> {
    return trx(SearchLog.tableName).where({ id, kind: 'identify' }).forUpdate().first('id', 'orgId', 'escalatedAt');
  }

  async markEscalated(id: string, operatorId: string, trx?: Db): Promise<Date> {
    const db = this.on(trx);
    const [updated] = await db(SearchLog.tableName).where({ id }).update({ escalatedAt: db.fn.now(), escalatedBy: operatorId }).returning('escalatedAt');
    return (updated as { escalatedAt: Date }).escalatedAt;
  }

  /** Full rows of an operator's /identify calls, newest first, and their total. */
  async operatorIdentifyPage(operatorId: string, page: number, pageSize: number): Promise<{ rows: Record<string, unknown>[]; total: number }> {
    const base = () => this.db(SearchLog.tableName).where({ kind: 'identify', operatorId });
    const [rows, [{ total }]] = await Promise.all([
      base().select('*').orderBy(newestFirst()).modify(onePage, { page, pageSize }),
      base().count({ total: '*' }),
    ]);
    return { rows, total: Number(total) };
  }

  /** Whether an entry exists and concerns the user (an /identify that matched them, a /verify/self they ran). */
  async concerning(id: string, userId: string): Promise<{ concernsCaller: boolean } | undefined> {
    return this.db(SEARCH_LOGS)
      .where('s.id', id)
      .first(
        's.id',
        this.db.raw(`((s.kind = 'identify' AND ?::uuid = ANY(s.matched_user_ids)) OR (s.kind = 'verify_self' AND s.user_id = ?::uuid)) AS concerns_caller`, [
          userId,
          userId,
        ]),
      );
  }

  // ---- a consumer's history ----------------------------------------------------------------

  /** The entries of one user's history (a query builder to page, count or stream). */
  private historyQuery(userId: string): Knex.QueryBuilder {
    return this.db(SEARCH_LOGS).where((w) =>
      w
        .where((a) => a.where('s.kind', 'identify').whereRaw('s.matched_user_ids @> ARRAY[?]::uuid[]', [userId]))
        .orWhere((b) => b.where('s.kind', 'verify_self').where('s.userId', userId)),
    );
  }

  private historyItems(q: Knex.QueryBuilder, userId: string): Knex.QueryBuilder {
    return q
      .select(
        's.id',
        's.kind',
        's.outcome',
        's.createdAt',
        this.db.raw('s.created_at::text AS cursor_ts'),
        // The user's own score: their candidate score for an /identify, the score of a /verify/self that
        // matched (a failed comparison's score is never shown: it would guide someone trying faces).
        this.db.raw(
          `CASE WHEN s.kind = 'identify'
             THEN (SELECT (c->>'score')::float8 FROM jsonb_array_elements(s.candidates) c WHERE c->>'userId' = ? LIMIT 1)
             WHEN s.outcome = 'match' THEN round(s.top_score::numeric, 4)::float8
             ELSE NULL END AS score`,
          [userId],
        ),
        this.db.raw(`EXISTS (SELECT 1 FROM ${Dispute.tableName} d WHERE d.search_log_id = s.id AND d.user_id = ?) AS disputed`, [userId]),
      )
      .orderBy(newestFirst('s'));
  }

  async historyCount(userId: string): Promise<number> {
    const [countRow] = await this.historyQuery(userId).count<{ count: string }[]>({ count: '*' });
    return Number(countRow?.count ?? 0);
  }

  async historyPage(userId: string, page: number, pageSize: number): Promise<HistoryRow[]> {
    return onePage(this.historyItems(this.historyQuery(userId), userId), { page, pageSize });
  }

  /** The next `limit` entries after a keyset cursor (from the start when null), newest first. */
  async historyAfter(userId: string, after: { cursorTs: string; id: string } | null, limit: number): Promise<HistoryRow[]> {
    const q = this.historyQuery(userId);
    if (after) q.whereRaw('(s.created_at, s.id) < (?::timestamptz, ?::uuid)', [after.cursorTs, after.id]);
    return this.historyItems(q, userId).limit(limit);
  }

  // ---- reports -----------------------------------------------------------------------------

  /** Entries per kind and outcome in a range, with how many of them were disputed. */
  async outcomeCounts(kinds: readonly string[], range: DateRange): Promise<{ kind: string; outcome: string; n: string; disputed: string }[]> {
    return whereInRange(this.db(SEARCH_LOGS).whereIn('s.kind', [...kinds]), 's.createdAt', range)
      .groupBy('s.kind', 's.outcome')
      .select(
        's.kind',
        's.outcome',
        this.db.raw('count(*) AS n'),
        this.db.raw(`count(*) FILTER (WHERE EXISTS (SELECT 1 FROM ${Dispute.tableName} d WHERE d.search_log_id = s.id)) AS disputed`),
      );
  }

  /** Entries per UTC day, kind and outcome in a range, oldest day first. */
  async dailyOutcomeCounts(kinds: readonly string[], range: DateRange): Promise<{ day: string; kind: string; outcome: string; n: string }[]> {
    return whereInRange(this.db(SEARCH_LOGS).whereIn('s.kind', [...kinds]), 's.createdAt', range)
      .groupByRaw('1, 2, 3')
      .orderByRaw('1')
      .select(this.db.raw(`to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day`), 's.kind', 's.outcome', this.db.raw('count(*) AS n'));
  }

  /** An organisation's /identify calls per outcome in a range (an entry without an org is its operator's). */
  async identifyOutcomesOfOrg(orgId: string, range: DateRange): Promise<{ outcome: string; n: string }[]> {
    return whereInRange(
      this.db(SEARCH_LOGS)
        .leftJoin(`${Operator.tableName} as o`, 'o.id', 's.operatorId')
        .where('s.kind', 'identify')
        .whereRaw('coalesce(s.org_id, o.org_id) = ?', [orgId]),
      's.createdAt',
      range,
    )
      .groupBy('s.outcome')
      .select('s.outcome', this.db.raw('count(*) AS n'));
  }

  // ---- disputes ----------------------------------------------------------------------------

  private disputes(db: Db): Knex.QueryBuilder {
    return db(DISPUTES)
      .join(SEARCH_LOGS, 's.id', 'd.searchLogId')
      .select('d.id', 'd.searchLogId', 's.kind', 'd.userId', 'd.reason', 'd.status', 'd.note', 'd.createdAt', 'd.updatedAt');
  }

  async findDispute(id: string, trx?: Db): Promise<DisputeRow | undefined> {
    return this.disputes(this.on(trx)).where('d.id', id).first();
  }

  /** Inserts an open dispute; a second one by the same user on the same entry is a unique violation. */
  async insertDispute(d: { searchLogId: string; userId: string; reason: string | null }, trx?: Db): Promise<string> {
    const [row] = await this.on(trx)(Dispute.tableName)
      .insert({ ...d, status: 'open' })
      .returning(['id']);
    return row.id as string;
  }

  async disputeStatus(id: string, trx?: Db): Promise<DisputeStatus | undefined> {
    return (await this.on(trx)(Dispute.tableName).where({ id }).first('status'))?.status;
  }

  /** Moves a dispute, conditional on its status still being `from`; false when it changed meanwhile. */
  async moveDispute(id: string, from: DisputeStatus, change: { status: DisputeStatus; note?: string; updatedBy: string }, trx?: Db): Promise<boolean> {
    const db = this.on(trx);
    const updated = await db(Dispute.tableName)
      .where({ id, status: from })
      .update({ status: change.status, ...(change.note !== undefined ? { note: change.note } : {}), updatedBy: change.updatedBy, updatedAt: db.fn.now() })
      .returning(['id']);
    return updated.length > 0;
  }

  async disputePage(f: DisputeFilter, page: number, pageSize: number): Promise<{ rows: DisputeRow[]; total: number }> {
    const filtered = (q: Knex.QueryBuilder) => {
      if (f.status) q.where('d.status', f.status);
      if (f.userId) q.where('d.userId', f.userId);
      if (f.referenceId) q.where('d.searchLogId', f.referenceId);
      return whereInRange(q, 'd.createdAt', f.range);
    };
    const [countRow] = await filtered(this.db(DISPUTES)).count<{ count: string }[]>({ count: '*' });
    const rows = await filtered(this.disputes(this.db)).orderBy(newestFirst('d')).modify(onePage, { page, pageSize });
    return { rows, total: Number(countRow?.count ?? 0) };
  }

  /** Every dispute the user opened, newest first (their data export). */
  async disputesOf(userId: string): Promise<DisputeRow[]> {
    return this.disputes(this.db).where('d.userId', userId).orderBy(newestFirst('d'));
  }
}
