/**
 * The consumer's verification history: every /identify whose matched candidates include the user and
 * every /verify/self the user ran, newest first. The score is the user's own: for an /identify, this
 * user's candidate score (not the best candidate's); for a /verify/self, its score (top_score).
 * `disputed` says whether this user has disputed the entry.
 *
 * The CSV export streams the same rows unpaged: batches read by keyset (createdAt, id) are fed to
 * csv-stringify, so memory stays flat however long the history is.
 */
import { Readable } from 'node:stream';
import { stringify } from 'csv-stringify';
import type { Knex } from 'knex';

export type HistoryKind = 'identify' | 'verify_self';

export interface HistoryItem {
  referenceId: string;
  kind: HistoryKind;
  outcome: string;
  score: number | null;
  createdAt: string;
  disputed: boolean;
}

export const HISTORY_COLUMNS = ['referenceId', 'kind', 'outcome', 'score', 'createdAt', 'disputed'] as const;

/** The rows of one user's history (a query builder to page, count or stream). */
function historyQuery(db: Knex, userId: string): Knex.QueryBuilder {
  return db('searchLogs as s').where((w) =>
    w
      .where((a) => a.where('s.kind', 'identify').whereRaw('s.matched_user_ids @> ARRAY[?]::uuid[]', [userId]))
      .orWhere((b) => b.where('s.kind', 'verify_self').where('s.userId', userId)),
  );
}

function selectItems(db: Knex, q: Knex.QueryBuilder, userId: string): Knex.QueryBuilder {
  return q.select(
    's.id',
    's.kind',
    's.outcome',
    's.createdAt',
    // Full-precision cursor for the keyset (a JS Date would drop the microseconds).
    db.raw('s.created_at::text AS cursor_ts'),
    db.raw(
      `CASE WHEN s.kind = 'identify'
         THEN (SELECT (c->>'score')::float8 FROM jsonb_array_elements(s.candidates) c WHERE c->>'userId' = ? LIMIT 1)
         ELSE round(s.top_score::numeric, 4)::float8 END AS score`,
      [userId],
    ),
    db.raw('EXISTS (SELECT 1 FROM disputes d WHERE d.search_log_id = s.id AND d.user_id = ?) AS disputed', [userId]),
  );
}

interface Row {
  id: string;
  kind: HistoryKind;
  outcome: string;
  createdAt: Date;
  cursorTs: string;
  score: number | string | null;
  disputed: boolean;
}

function toItem(r: Row): HistoryItem {
  return {
    referenceId: r.id,
    kind: r.kind,
    outcome: r.outcome,
    score: r.score === null || r.score === undefined ? null : Number(r.score),
    createdAt: new Date(r.createdAt).toISOString(),
    disputed: Boolean(r.disputed),
  };
}

export async function listHistory(
  db: Knex,
  userId: string,
  page: number,
  pageSize: number,
): Promise<{ items: HistoryItem[]; page: number; pageSize: number; total: number }> {
  const [countRow] = await historyQuery(db, userId).count<{ count: string }[]>({ count: '*' });
  const rows: Row[] = await selectItems(db, historyQuery(db, userId), userId)
    .orderBy([{ column: 's.createdAt', order: 'desc' }, { column: 's.id', order: 'desc' }])
    .limit(pageSize)
    .offset((page - 1) * pageSize);
  return { items: rows.map(toItem), page, pageSize, total: Number(countRow?.count ?? 0) };
}

/** Every history item, newest first, read in keyset batches. */
export async function* iterateHistory(db: Knex, userId: string, batchSize = 500): AsyncGenerator<HistoryItem> {
  let after: { cursorTs: string; id: string } | null = null;
  for (;;) {
    const q = historyQuery(db, userId);
    if (after) {
      q.whereRaw('(s.created_at, s.id) < (?::timestamptz, ?::uuid)', [after.cursorTs, after.id]);
    }
    const rows: Row[] = await selectItems(db, q, userId)
      .orderBy([{ column: 's.createdAt', order: 'desc' }, { column: 's.id', order: 'desc' }])
      .limit(batchSize);
    for (const r of rows) yield toItem(r);
    if (rows.length < batchSize) return;
    const last = rows[rows.length - 1]!;
    after = { cursorTs: last.cursorTs, id: last.id };
  }
}

/** Characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection"). */
const FORMULA_START = /^[=+\-@\t\r]/;

/** A text cell that would start a formula gets a leading `'`, which spreadsheets show as text. */
export function neutraliseCell(value: string): string {
  return FORMULA_START.test(value) ? `'${value}` : value;
}

/**
 * The CSV stream of a user's history: a header row, then one row per item. Text cells are neutralised;
 * numbers (the score) and booleans are written by us from typed values and cannot carry a formula.
 */
export function historyCsv(db: Knex, userId: string): Readable {
  const csv = stringify({
    header: true,
    columns: [...HISTORY_COLUMNS],
    cast: {
      string: (v) => neutraliseCell(v),
      boolean: (v) => (v ? 'true' : 'false'),
      number: (v) => String(v),
    },
  });
  const source = Readable.from(iterateHistory(db, userId));
  source.on('error', (e) => csv.destroy(e));
  return source.pipe(csv);
}
