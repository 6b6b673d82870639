/**
 * Operators, and the sessions and refresh tokens of every subject (consumers and operators): the state
 * the authorisation layer reads on every request and the auth services change.
 */
import type { Knex } from 'knex';
import { Operator, RefreshToken, Session, type OperatorRole, type OperatorStatus } from '../../models/index.js';
import { fn } from 'objection';
import { Repository, type Db } from '../../platform/database/unit-of-work.js';
import { newestFirstPage } from '../../platform/lists/paging.js';

export type SubjectType = Session['subjectType'];
export interface SessionSubject {
  type: SubjectType;
  id: string;
}

const toOperator = (row: Record<string, unknown>) => Operator.fromDatabaseJson(row) as Operator;

export interface NewOperatorRow {
  identifier: string;
  displayName: string;
  role: OperatorRole;
  status: OperatorStatus;
  mustResetPassword: boolean;
  passwordHash: string;
  orgId?: string;
  createdBy?: string | null;
}

export interface OperatorFilter {
  page: number;
  pageSize: number;
  role?: OperatorRole;
  status?: OperatorStatus;
  /** Substring of the identifier or the display name, case-insensitive. */
  q?: string;
}

/**
 * How failed sign-ins lock an account (OperatorAuthService builds it from the settings and the role):
 * every `lockEvery`-th consecutive failure locks for `firstLockSeconds`, doubled per further lock up to
 * `maxLockSeconds`; `permanentAfter` failures lock until a reset or `npm run unlock-operator`.
 */
export interface LockPolicy {
  lockEvery: number;
  permanentAfter: number;
  firstLockSeconds: number;
  maxLockSeconds: number;
}

/** Not locked at this moment, by the database's clock: never locked, or a lock whose window has lapsed. */
const NOT_LOCKED_NOW = '(operators.locked_at IS NULL OR operators.locked_until <= now())';

/** LIKE treats `%`, `_` and `\` specially: a search for "a_b" means those three characters. */
const likeEscape = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

export class OperatorsRepository extends Repository {
  /** A page of operators, newest first, with the filter's total. */
  async list(f: OperatorFilter): Promise<{ rows: Operator[]; total: number }> {
    const base = () => {
      const qb = Operator.query(this.db);
      if (f.role) qb.where({ role: f.role });
      if (f.status) qb.where({ status: f.status });
      if (f.q) {
        const pattern = `%${likeEscape(f.q)}%`;
        qb.where((w) => w.whereILike('identifier', pattern).orWhereILike('displayName', pattern));
      }
      return qb;
    };
    return newestFirstPage(base, f);
  }

  async find(id: string, trx?: Db): Promise<Operator | undefined> {
    return Operator.query(this.on(trx)).findById(id);
  }

  /**
   * What the authoriser checks on every operator request, and nothing else (no password hash, no MFA
   * secret): a plain query, not objection's model of the whole row.
   */
  async authState(id: string, trx?: Db): Promise<Pick<Operator, 'status' | 'mustResetPassword' | 'mfaEnabledAt' | 'role' | 'orgId'> | undefined> {
    return this.on(trx)(Operator.tableName).where({ id }).first('status', 'mustResetPassword', 'mfaEnabledAt', 'role', 'orgId');
  }

  async findForUpdate(id: string, trx: Knex.Transaction): Promise<Operator | undefined> {
    return Operator.query(trx).findById(id).forUpdate();
  }

  /** By identifier, compared case-insensitively. */
  async findByIdentifier(identifier: string, trx?: Db): Promise<Operator | undefined> {
    return Operator.query(this.on(trx)).whereRaw('lower(identifier) = lower(?)', [identifier]).first();
  }

  async insert(row: NewOperatorRow, trx?: Db): Promise<Operator> {
    const [inserted] = await this.on(trx)(Operator.tableName).insert(row).returning('*');
    return toOperator(inserted);
  }

  /** Changes an operator; with `unlockedOnly`, only while it is not locked now (undefined otherwise). */
  async update(
    id: string,
    changes: Partial<
      Pick<Operator, 'displayName' | 'role' | 'status' | 'passwordHash' | 'mustResetPassword' | 'failedLoginCount' | 'lockedAt' | 'lockedUntil'>
    >,
    opts: { unlockedOnly?: boolean } = {},
    trx?: Db,
  ): Promise<Operator | undefined> {
    const db = this.on(trx);
    const q = db(Operator.tableName).where({ id });
    if (opts.unlockedOnly) q.whereRaw(NOT_LOCKED_NOW);
    const [row] = await q.update({ ...changes, updatedAt: db.fn.now() }).returning('*');
    return row ? toOperator(row) : undefined;
  }

  /** A successful sign-in: the failure counter and any lapsed lock cleared (and a rehashed password stored), unless locked meanwhile. */
  async clearFailures(id: string, rehash: string | null): Promise<Pick<Operator, 'mustResetPassword' | 'status'> | undefined> {
    const [row] = await this.db(Operator.tableName)
      .where({ id })
      .whereRaw(NOT_LOCKED_NOW)
      .update({ failedLoginCount: 0, lockedAt: null, lockedUntil: null, ...(rehash ? { passwordHash: rehash } : {}) })
      .returning(['mustResetPassword', 'status']);
    return row;
  }

  /**
   * Counts one failed sign-in and applies the lock policy in the same UPDATE: every `lockEvery`-th
   * consecutive failure locks, for `firstLockSeconds` doubling with each further lock up to
   * `maxLockSeconds`; from `permanentAfter` failures on the lock has no end. Conditional on not being
   * locked now (a lapsed lock counts as unlocked, its count kept), so concurrent guesses cannot
   * overshoot a limit or slip past a lock (undefined: it is locked).
   */
  async countFailure(id: string, policy: LockPolicy): Promise<Pick<Operator, 'failedLoginCount' | 'lockedAt' | 'lockedUntil'> | undefined> {
    const { lockEvery, permanentAfter, firstLockSeconds, maxLockSeconds } = policy;
    const n = 'failed_login_count + 1';
    const [row] = await this.db(Operator.tableName)
      .where({ id })
      .whereRaw(NOT_LOCKED_NOW)
      .update({
        failedLoginCount: this.db.raw(n),
        lockedAt: this.db.raw(`CASE WHEN ${n} >= ?::int OR (${n}) % ?::int = 0 THEN now() ELSE NULL END`, [permanentAfter, lockEvery]),
        lockedUntil: this.db.raw(
          `CASE WHEN ${n} >= ?::int THEN NULL
                WHEN (${n}) % ?::int = 0 THEN now() + make_interval(secs => LEAST(?::int, ?::int * power(2, (${n}) / ?::int - 1)))
                ELSE NULL END`,
          [permanentAfter, lockEvery, maxLockSeconds, firstLockSeconds, lockEvery],
        ),
      })
      .returning(['failedLoginCount', 'lockedAt', 'lockedUntil']);
    return row;
  }

  /** Clears the lock and the failure count whatever they are (`npm run unlock-operator`). */
  async unlock(id: string, trx?: Db): Promise<void> {
    await Operator.query(this.on(trx)).findById(id).patch({ lockedAt: null, lockedUntil: null, failedLoginCount: 0, updatedAt: fn.now() });
  }

  /** Serialises every change that could leave the deployment without an administrator. */
  async lockAdministrators(trx: Knex.Transaction): Promise<void> {
    await trx.raw("SELECT pg_advisory_xact_lock(hashtext('faceid:operators:administrators'))");
  }

  /** Active, unlocked administrators other than `exceptId`: the ones who could still manage the deployment. */
  async otherManagingAdministrators(exceptId: string, trx?: Db): Promise<number> {
    return Operator.query(this.on(trx)).where({ role: 'administrator', status: 'active' }).whereRaw(NOT_LOCKED_NOW).whereNot({ id: exceptId }).resultSize();
  }

  async activeAdministratorExists(trx?: Db): Promise<boolean> {
    return Boolean(await Operator.query(this.on(trx)).where({ role: 'administrator', status: 'active' }).select('id').first());
  }
}

/** Days a refresh-token row outlives its expiry: presenting a rotated token again is still recognised as reuse. */
export const REFRESH_TOKEN_REUSE_GRACE_DAYS = 30;

export class SessionsRepository extends Repository {
  /** Opens a session and returns its id. */
  async open(subject: SessionSubject, deviceHint: string | null, trx?: Db): Promise<string> {
    const session = await Session.query(this.on(trx)).insert({ subjectType: subject.type, subjectId: subject.id, deviceHint });
    return session.id;
  }

  /** Opens a session with its first refresh token: both or neither. */
  async openWithRefreshToken(subject: SessionSubject, deviceHint: string | null, refresh: { tokenHash: string; expiresAt: Date }): Promise<string> {
    return this.transaction(async (trx) => {
      const sessionId = await this.open(subject, deviceHint, trx);
      await this.insertRefreshToken(sessionId, refresh.tokenHash, refresh.expiresAt, trx);
      return sessionId;
    });
  }

  async find(id: string, trx?: Db): Promise<Pick<Session, 'id' | 'subjectType' | 'subjectId' | 'revokedAt' | 'createdAt'> | undefined> {
    return Session.query(this.on(trx)).findById(id).select('id', 'subjectType', 'subjectId', 'revokedAt', 'createdAt');
  }

  /** The session `id` of this subject, if it exists (revoked or not), and when it was opened. */
  async findOf(id: string, subject: SessionSubject, trx?: Db): Promise<Pick<Session, 'revokedAt' | 'createdAt'> | undefined> {
    // A plain query, not objection's: read by the authoriser on every request of a signed-in caller.
    return this.on(trx)(Session.tableName).where({ id, subjectType: subject.type, subjectId: subject.id }).first('revokedAt', 'createdAt');
  }

  /** Revokes one session: its access tokens stop at the next request, its refresh tokens stop working. */
  async revoke(sessionId: string, reason: string, trx?: Db): Promise<boolean> {
    const n = await Session.query(this.on(trx)).findById(sessionId).whereNull('revokedAt').patch({ revokedAt: fn.now(), revokedReason: reason });
    return n > 0;
  }

  /** Revokes every live session of a subject (optionally but one): logout everywhere, deactivation, reset. */
  async revokeAllOf(subject: SessionSubject, reason: string, opts: { exceptSessionId?: string } = {}, trx?: Db): Promise<number> {
    const q = Session.query(this.on(trx)).where({ subjectType: subject.type, subjectId: subject.id }).whereNull('revokedAt');
    if (opts.exceptSessionId) q.whereNot({ id: opts.exceptSessionId });
    return q.patch({ revokedAt: fn.now(), revokedReason: reason });
  }

  // ---- refresh tokens (stored as SHA-256 only) ---------------------------------------------

  async insertRefreshToken(sessionId: string, tokenHash: string, expiresAt: Date, trx?: Db): Promise<void> {
    await RefreshToken.query(this.on(trx)).insert({ sessionId, tokenHash, expiresAt });
  }

  /**
   * Marks a refresh token used, once: of N concurrent presentations exactly one sees used_at still
   * NULL and gets the row (the others get undefined). Used tokens stay, so that reuse is recognised.
   */
  async takeRefreshToken(tokenHash: string): Promise<Pick<RefreshToken, 'sessionId' | 'expiresAt'> | undefined> {
    const [row] = await this.db(RefreshToken.tableName)
      .where({ tokenHash })
      .whereNull('usedAt')
      .update({ usedAt: this.db.fn.now() })
      .returning(['sessionId', 'expiresAt']);
    return row;
  }

  /** The session of a refresh token, used or not. */
  async sessionOfRefreshToken(tokenHash: string): Promise<string | undefined> {
    const row = await RefreshToken.query(this.db).where({ tokenHash }).select('sessionId').first();
    return row?.sessionId;
  }

  /** Ends every unexpired refresh token of a subject's sessions now; returns how many. */
  async expireRefreshTokensOf(subject: SessionSubject, trx?: Db): Promise<number> {
    const db = this.on(trx);
    const sessionIds = db(Session.tableName).where({ subjectType: subject.type, subjectId: subject.id }).select('id');
    return db(RefreshToken.tableName).whereIn('sessionId', sessionIds).where('expiresAt', '>', db.fn.now()).update({ expiresAt: db.fn.now() });
  }

  /**
   * Deletes refresh-token rows that expired more than `graceDays` ago. The grace keeps a rotated token's
   * row long enough that presenting it again is still recognised as reuse (and revokes its family).
   */
  async pruneExpiredRefreshTokens(graceDays = REFRESH_TOKEN_REUSE_GRACE_DAYS): Promise<number> {
    return this.pruneRefreshTokensExpiredBefore(new Date(Date.now() - graceDays * 86_400_000));
  }

  /** Deletes the refresh-token rows that expired before `cutoff`; returns how many. */
  async pruneRefreshTokensExpiredBefore(cutoff: Date): Promise<number> {
    return this.db(RefreshToken.tableName).where('expiresAt', '<', cutoff).del();
  }
}
