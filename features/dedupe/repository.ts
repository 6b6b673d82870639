/**
 * Duplicate-identity cases and the face watch-list (docs/dedupe.md). Biometric columns hold blobs the
 * service sealed with the biometric key ring (platform/keys/key-ring.ts); this module never sees a
 * face in clear.
 */
import type { Knex } from 'knex';
import { Repository, type Db } from '../../platform/database/unit-of-work.js';
import { countOf, onePage, type PageRequest } from '../../platform/lists/paging.js';

export type DedupeKind = 'duplicate' | 'possible_duplicate' | 'watchlist';
export type DedupeStatus = 'open' | 'confirmed' | 'dismissed';
export const DEDUPE_KINDS = ['duplicate', 'possible_duplicate', 'watchlist'] as const satisfies readonly DedupeKind[];
export const DEDUPE_STATUSES = ['open', 'confirmed', 'dismissed'] as const satisfies readonly DedupeStatus[];

export interface DedupeCaseRow {
  id: string;
  kind: DedupeKind;
  status: DedupeStatus;
  userId: string;
  matchedUserId: string | null;
  watchlistEntryId: string | null;
  score: number;
  registry: 'nin' | 'bvn';
  blocked: boolean;
  hasCapture: boolean;
  createdAt: Date;
  decidedAt: Date | null;
  decidedBy: string | null;
  note: string | null;
}

export interface NewDedupeCase {
  id: string;
  kind: DedupeKind;
  userId: string;
  matchedUserId: string | null;
  watchlistEntryId: string | null;
  score: number;
  registry: 'nin' | 'bvn';
  blocked: boolean;
  captureSealed: Buffer | null;
}

export interface WatchlistRow {
  id: string;
  reason: string;
  engineVersion: string;
  createdAt: Date;
}

const CASES = 'dedupeCases';
const WATCHLIST = 'watchlistEntries';
const CASE_COLUMNS = [
  'id',
  'kind',
  'status',
  'userId',
  'matchedUserId',
  'watchlistEntryId',
  'score',
  'registry',
  'blocked',
  'createdAt',
  'decidedAt',
  'decidedBy',
  'note',
] as const;

export class DedupeRepository extends Repository {
  private selectCases(db: Db): Knex.QueryBuilder {
    return db(CASES).select(...CASE_COLUMNS, db.raw('capture_sealed is not null as has_capture'));
  }

  // ---- cases ---------------------------------------------------------------------------------

  async insertCase(c: NewDedupeCase, trx?: Db): Promise<void> {
    await this.on(trx)(CASES).insert({ ...c });
  }

  async findCase(id: string, trx?: Db): Promise<DedupeCaseRow | undefined> {
    return this.selectCases(this.on(trx)).where({ id }).first();
  }

  async casePage(f: { status?: DedupeStatus; kind?: DedupeKind; page: number; pageSize: number }, trx?: Db): Promise<{ rows: DedupeCaseRow[]; total: number }> {
    const db = this.on(trx);
    const filtered = (q: Knex.QueryBuilder) => {
      if (f.status) q.where({ status: f.status });
      if (f.kind) q.where({ kind: f.kind });
      return q;
    };
    const [rows, count] = await Promise.all([
      filtered(this.selectCases(db))
        .orderBy([
          { column: 'createdAt', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .modify(onePage, f),
      filtered(db(CASES)).count({ n: '*' }).first(),
    ]);
    return { rows, total: Number((count as { n: string | number } | undefined)?.n ?? 0) };
  }

  /** Decides an open case; false when it was not open any more (another administrator decided first). */
  async decideCase(id: string, change: { status: 'confirmed' | 'dismissed'; note: string | null; decidedBy: string }, trx?: Db): Promise<boolean> {
    const db = this.on(trx);
    const n = await db(CASES)
      .where({ id, status: 'open' })
      .update({ ...change, decidedAt: db.fn.now() });
    return n > 0;
  }

  async caseCapture(id: string, trx?: Db): Promise<Buffer | null> {
    const row = await this.on(trx)(CASES).where({ id }).first('captureSealed');
    return (row?.captureSealed as Buffer | null | undefined) ?? null;
  }

  /** Deletes the captures of cases decided before `cutoff`; the cases stay. Returns how many. */
  async purgeCapturesDecidedBefore(cutoff: Date, trx?: Db): Promise<number> {
    return this.on(trx)(CASES).whereNotNull('captureSealed').whereNot({ status: 'open' }).where('decidedAt', '<=', cutoff).update({ captureSealed: null });
  }

  /** An erasure: the live captures the user gave when linking (open or decided cases alike); the cases stay. */
  async eraseCapturesOf(userId: string, trx?: Db): Promise<number> {
    return this.on(trx)(CASES).where({ userId }).whereNotNull('captureSealed').update({ captureSealed: null });
  }

  /** What a reviewer may see of an account (masked by the service): name, phone, linked numbers. */
  async accountFacts(
    userId: string,
    trx?: Db,
  ): Promise<
    | { name: string | null; phone: string; deletedAt: Date | null; nin: string | null; ninLinkedAt: Date | null; bvn: string | null; bvnLinkedAt: Date | null }
    | undefined
  > {
    return this.on(trx)('users as u')
      .leftJoin('ninLinks as n', 'n.userId', 'u.id')
      .leftJoin('bvnLinks as b', 'b.userId', 'u.id')
      .where('u.id', userId)
      .first('u.name', 'u.phone', 'u.deletedAt', 'n.nin', 'n.linkedAt as ninLinkedAt', 'b.bvn', 'b.linkedAt as bvnLinkedAt');
  }

  // ---- watch-list ----------------------------------------------------------------------------

  async insertWatchlistEntry(
    e: { id: string; reason: string; embeddingSealed: Buffer; engineVersion: string; createdBy: string | null; sourceCaseId: string | null },
    trx?: Db,
  ): Promise<WatchlistRow> {
    const [row] = await this.on(trx)(WATCHLIST).insert(e).returning(['id', 'reason', 'engineVersion', 'createdAt']);
    return row as WatchlistRow;
  }

  /** One page of the watch-list, newest first, and the number of entries. */
  async watchlistPage(request: PageRequest, trx?: Db): Promise<{ rows: WatchlistRow[]; total: number }> {
    const db = this.on(trx);
    const [rows, count] = await Promise.all([
      db(WATCHLIST)
        .orderBy([
          { column: 'createdAt', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .select('id', 'reason', 'engineVersion', 'createdAt')
        .modify(onePage, request),
      db(WATCHLIST).count({ n: '*' }).first(),
    ]);
    return { rows, total: countOf(count) };
  }

  async watchlistEntry(id: string, trx?: Db): Promise<WatchlistRow | undefined> {
    return this.on(trx)(WATCHLIST).where({ id }).first('id', 'reason', 'engineVersion', 'createdAt');
  }

  /** Every entry of one engine version with its sealed embedding (the search at link reads them all). */
  async watchlistTemplates(engineVersion: string, trx?: Db): Promise<{ id: string; embeddingSealed: Buffer }[]> {
    return this.on(trx)(WATCHLIST).where({ engineVersion }).select('id', 'embeddingSealed');
  }

  /** Changes whenever an entry of this engine version is added or removed (a cache's validity check). */
  async watchlistStamp(engineVersion: string, trx?: Db): Promise<string> {
    const row = await this.on(trx)(WATCHLIST)
      .where({ engineVersion })
      .first(this.db.raw("count(*)::text || ':' || coalesce(max(created_at)::text, '') || ':' || coalesce(max(id::text), '') as stamp"));
    return String((row as { stamp?: string } | undefined)?.stamp ?? '');
  }

  async removeWatchlistEntry(id: string, trx?: Db): Promise<boolean> {
    return (await this.on(trx)(WATCHLIST).where({ id }).del()) > 0;
  }
}
