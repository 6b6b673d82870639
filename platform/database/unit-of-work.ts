/**
 * What every repository method runs on: the repository's own knex, or the caller's transaction when
 * one is passed, so that a service keeps several writes atomic across repositories.
 */
import type { Knex } from 'knex';

export type Db = Knex | Knex.Transaction;

/** A unit of work in progress: one PostgreSQL transaction that several repositories' methods join. */
export type Tx = Knex.Transaction;

/**
 * Where a change spans several repositories (a row and its AuditEvent, a session and its refresh
 * token), the service runs it as one unit of work and passes the `Tx` to each repository method:
 * all of it lands, or none. Services hold this, never the knex handle.
 */
export class UnitOfWork {
  constructor(private readonly db: Knex) {}

  run<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /** One round trip to PostgreSQL (the health check). */
  async ping(): Promise<void> {
    await this.db.raw('select 1');
  }
}

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

/** A unique violation (23505), raised by knex (the driver's error) or by objection (db-errors wraps it: `nativeError`). */
export const isUniqueViolation = (e: unknown) => {
  const err = e as { code?: string; nativeError?: { code?: string } } | null;
  return err?.code === '23505' || err?.nativeError?.code === '23505';
};
