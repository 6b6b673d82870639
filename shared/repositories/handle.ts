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

export const isUniqueViolation = (e: unknown) => (e as { code?: string } | null)?.code === '23505';
