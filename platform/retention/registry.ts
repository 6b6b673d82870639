/**
 * The retention registry (platform/retention/README.md): every kind of record the service keeps about
 * people is a *data family*, declared by the wing that owns it (its name, where it lives, how long it
 * is kept, and what the erasure of a user removes from it). The process composes the wings' families
 * into one registry (processes/data-families.ts); one sweep (./sweep.ts) applies every age rule, and
 * the DELETE of an account (features/accounts) runs every eraser. The floor knows no wing: it only
 * runs what was registered.
 */
import type { Tx } from '../database/unit-of-work.js';

/** The age rule of a family: what is older than `days` goes, by the retention sweep. */
export interface AgeRule {
  /** Days a record is kept (from its RETENTION_* setting). */
  days: number;
  /** The rule in words (what "older" is measured from, what is never purged): logs and docs. */
  rule: string;
  /**
   * Deletes the records past the rule, `cutoff` being now minus `days`; returns how many went.
   * Works in batches (a first run on a large table must not hold a lock for minutes).
   */
  purge(cutoff: Date): Promise<number>;
}

/** The user an erasure is about; the phone is known at the DELETE only (it is erased with the row). */
export interface ErasureSubject {
  userId: string;
  phone: string | null;
}

/** Erased in the DELETE's own transaction (PostgreSQL rows): both or neither with the soft-delete. */
export interface EraseInTransaction {
  phase: 'transaction';
  /** What goes, in words. */
  removes: string;
  erase(userId: string, trx: Tx): Promise<void>;
}

/**
 * Erased after the DELETE committed (copies outside PostgreSQL, e.g. Redis). Idempotent: when it fails
 * at the DELETE, the retention sweep runs it again (without the phone) until it succeeds.
 */
export interface EraseAfterCommit {
  phase: 'after-commit';
  removes: string;
  erase(subject: ErasureSubject): Promise<void>;
}

export interface DataFamily {
  /** Unique name; the key of its count in the `retention.purged` audit event. */
  name: string;
  /** Where it lives: a table (`search_logs`) or a store (`redis identity:*`). */
  store: string;
  /** How long it is kept; none: it is kept as long as the account (or for its own reasons, see docs). */
  retention?: AgeRule;
  /** What the erasure of a user removes from it; none: it holds nothing of the user (or is kept, see docs). */
  erasure?: EraseInTransaction | EraseAfterCommit;
}

/**
 * The erasures in progress (kept by the accounts wing): which ones still wait for their after-commit
 * step past the DELETE's own attempt, and the receipt once every copy is gone.
 */
export interface ErasureLedger {
  /** Users whose after-commit erasure has not been confirmed `graceMs` after their DELETE. */
  awaitingAfterCommit(graceMs: number): Promise<string[]>;
  markAfterCommitDone(userId: string): Promise<void>;
  /** Completes (and audits, `user.erased`) every erasure whose copies are all gone; returns the user ids. */
  completeCovered(): Promise<string[]>;
}

export class RetentionRegistry {
  private readonly byName = new Map<string, DataFamily>();

  /** Families are applied in registration order (a family purged first can free rows of a later one). */
  register(...families: DataFamily[]): this {
    for (const f of families) {
      if (this.byName.has(f.name)) throw new Error(`data family ${f.name} is registered twice`);
      this.byName.set(f.name, f);
    }
    return this;
  }

  families(): DataFamily[] {
    return [...this.byName.values()];
  }

  /** The families with an age rule, in registration order. */
  aged(): (DataFamily & { retention: AgeRule })[] {
    return this.families().filter((f): f is DataFamily & { retention: AgeRule } => f.retention !== undefined);
  }

  /** Step 1 of an erasure, in the DELETE's transaction: every family's PostgreSQL rows of the user. */
  async eraseInTransaction(userId: string, trx: Tx): Promise<void> {
    for (const f of this.families()) if (f.erasure?.phase === 'transaction') await f.erasure.erase(userId, trx);
  }

  /** Step 2, after the commit: every copy outside PostgreSQL. Throws on the first failure (the sweep retries all). */
  async eraseAfterCommit(subject: ErasureSubject): Promise<void> {
    for (const f of this.families()) if (f.erasure?.phase === 'after-commit') await f.erasure.erase(subject);
  }
}
