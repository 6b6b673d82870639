/**
 * What every repository method runs on: the repository's own knex, or the caller's transaction when
 * one is passed, so that a service keeps several writes atomic across repositories.
 */
import type { Knex } from 'knex';

export type Db = Knex | Knex.Transaction;

export abstract class Repository {
  constructor(protected readonly db: Knex) {}

  protected on(trx?: Db): Db {
    return trx ?? this.db;
  }

  /** Runs `fn` in the caller's transaction, or in a new one. */
  transaction<T>(fn: (trx: Knex.Transaction) => Promise<T>, trx?: Knex.Transaction): Promise<T> {
    return trx ? fn(trx) : this.db.transaction(fn);
  }
}

/**
 * One page of a filtered query, newest first (createdAt, then id, both descending), with the filter's
 * total: `filtered` builds the same filtered query twice, once for the rows and once for the count.
 */
export async function newestFirstPage(
  filtered: () => Knex.QueryBuilder,
  page: { page: number; pageSize: number },
): Promise<{ rows: Record<string, unknown>[]; total: number }> {
  const [rows, [{ total }]] = await Promise.all([
    filtered()
      .select('*')
      .orderBy([{ column: 'createdAt', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(page.pageSize)
      .offset((page.page - 1) * page.pageSize),
    filtered().count({ total: '*' }),
  ]);
  return { rows, total: Number(total) };
}

export const isUniqueViolation = (e: unknown) => (e as { code?: string } | null)?.code === '23505';
