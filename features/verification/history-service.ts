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
import type { HistoryKind, HistoryRow, SearchLogsRepository } from './search-logs-repository.js';
import { pageOf, type Page } from '../../platform/lists/paging.js';

export type { HistoryKind };

export interface HistoryItem {
  referenceId: string;
  kind: HistoryKind;
  outcome: string;
  score: number | null;
  createdAt: string;
  disputed: boolean;
}

export const HISTORY_COLUMNS = ['referenceId', 'kind', 'outcome', 'score', 'createdAt', 'disputed'] as const;

const EXPORT_BATCH = 500;

function toItem(r: HistoryRow): HistoryItem {
  return {
    referenceId: r.id,
    kind: r.kind,
    outcome: r.outcome,
    score: r.score === null || r.score === undefined ? null : Number(r.score),
    createdAt: new Date(r.createdAt).toISOString(),
    disputed: Boolean(r.disputed),
  };
}

/** Characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection"). */
const FORMULA_START = /^[=+\-@\t\r]/;

/** A text cell that would start a formula gets a leading `'`, which spreadsheets show as text. */
export function neutraliseCell(value: string): string {
  return FORMULA_START.test(value) ? `'${value}` : value;
}

export class HistoryService {
  constructor(private readonly deps: { searchLogs: SearchLogsRepository }) {}

  async list(userId: string, page: number, pageSize: number): Promise<Page<HistoryItem>> {
    const [total, rows] = await Promise.all([this.deps.searchLogs.historyCount(userId), this.deps.searchLogs.historyPage(userId, page, pageSize)]);
    return pageOf(rows.map(toItem), { page, pageSize }, total);
  }

  /** Every history item, newest first, read in keyset batches. */
  async *iterate(userId: string, batchSize = EXPORT_BATCH): AsyncGenerator<HistoryItem> {
    let after: { cursorTs: string; id: string } | null = null;
    for (;;) {
      const rows = await this.deps.searchLogs.historyAfter(userId, after, batchSize);
      for (const r of rows) yield toItem(r);
      if (rows.length < batchSize) return;
      const last = rows[rows.length - 1]!;
      after = { cursorTs: last.cursorTs, id: last.id };
    }
  }

  /**
   * The CSV stream of a user's history: a header row, then one row per item. Text cells are neutralised;
   * numbers (the score) and booleans are written by us from typed values and cannot carry a formula.
   */
  csv(userId: string): Readable {
    const csv = stringify({
      header: true,
      columns: [...HISTORY_COLUMNS],
      cast: {
        string: (v) => neutraliseCell(v),
        boolean: (v) => (v ? 'true' : 'false'),
        number: (v) => String(v),
      },
    });
    const source = Readable.from(this.iterate(userId));
    source.on('error', (e) => csv.destroy(e));
    return source.pipe(csv);
  }
}
