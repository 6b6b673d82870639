/**
 * Sessions and their token pairs. A session row (`sessions`) is what an access token's `sid` names and
 * what the authorisation layer checks on every request; a refresh token belongs to one session.
 *
 * Refresh tokens are opaque (32 random bytes, base64url: 256 bits), stored only as SHA-256, valid for
 * REFRESH_TOKEN_TTL_SECONDS and rotated on every /auth/refresh: the presented token is consumed by a
 * conditional UPDATE (exactly one concurrent use wins), and presenting a consumed token again is
 * treated as theft: the whole session (its family of refresh tokens and every access token naming it)
 * is revoked at once.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../../shared/config.js';
import { AppError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { Metrics } from '../metrics.js';
import { recordAudit } from './audit-events.js';
import type { Audience, TokenService } from './token-service.js';

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
  refreshExpiresIn: number;
}

export type SessionSubject = { type: Audience; id: string };

/** What a refreshed pair belongs to (the response repeats `userId` or `operatorId` + `mustResetPassword`). */
export type RefreshedSubject =
  | { type: 'consumer'; userId: string }
  | { type: 'operator'; operatorId: string; mustResetPassword: boolean };

export interface SessionDeps {
  db: Knex;
  tokens: TokenService;
  config: Pick<Config, 'refreshTokenTtlSeconds'>;
  metrics?: Metrics;
  logger?: Logger;
}

export const hashRefreshToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');
const newRefreshToken = () => randomBytes(32).toString('base64url');

const invalidRefresh = () => new AppError('invalid_refresh_token', 'The refresh token is not valid; sign in again');

/** Revokes one session: its access tokens stop at the next request, its refresh tokens stop working. */
/**
 * Deletes refresh-token rows that expired more than `graceDays` ago. The grace keeps a rotated token's
 * row long enough that presenting it again is still recognised as reuse (and revokes its family).
 */
export async function pruneExpiredRefreshTokens(db: Knex, graceDays = 30): Promise<number> {
  return db('refreshTokens').where('expiresAt', '<', db.raw(`now() - make_interval(days => ?)`, [graceDays])).del();
}

export async function revokeSession(db: Knex | Knex.Transaction, sessionId: string, reason: string): Promise<boolean> {
  const n = await db('sessions').where({ id: sessionId }).whereNull('revokedAt').update({ revokedAt: db.fn.now(), revokedReason: reason });
  return Number(n) > 0;
}

/** Revokes every live session of a subject (optionally but one): logout everywhere, deactivation, reset. */
export async function revokeSubjectSessions(
  db: Knex | Knex.Transaction,
  subject: SessionSubject,
  reason: string,
  opts: { exceptSessionId?: string } = {},
): Promise<number> {
  const q = db('sessions').where({ subjectType: subject.type, subjectId: subject.id }).whereNull('revokedAt');
  if (opts.exceptSessionId) q.whereNot({ id: opts.exceptSessionId });
  return Number(await q.update({ revokedAt: db.fn.now(), revokedReason: reason }));
}

export class SessionService {
  constructor(private readonly deps: SessionDeps) {}

  private get ttl(): number {
    return this.deps.config.refreshTokenTtlSeconds;
  }

  private async insertRefreshToken(db: Knex | Knex.Transaction, sessionId: string): Promise<string> {
    const token = newRefreshToken();
    await db('refresh_tokens').insert({
      sessionId,
      tokenHash: hashRefreshToken(token),
      expiresAt: new Date(Date.now() + this.ttl * 1000),
    });
    return token;
  }

  private async pair(subject: SessionSubject, sessionId: string, refreshToken: string): Promise<TokenPair> {
    const { token, expiresIn } = await this.deps.tokens.signAccess({ sub: subject.id, aud: subject.type, sid: sessionId });
    return { accessToken: token, refreshToken, tokenType: 'Bearer', expiresIn, refreshExpiresIn: this.ttl };
  }

  /** Opens a new session for a subject that has just proven who it is, and returns its first pair. */
  async open(subject: SessionSubject, opts: { deviceHint?: string | null } = {}): Promise<TokenPair & { sessionId: string }> {
    const { sessionId, refreshToken } = await this.deps.db.transaction(async (trx) => {
      const [session] = await trx('sessions')
        .insert({ subjectType: subject.type, subjectId: subject.id, deviceHint: coarseDeviceHint(opts.deviceHint) })
        .returning('id');
      return { sessionId: session.id as string, refreshToken: await this.insertRefreshToken(trx, session.id) };
    });
    return { ...(await this.pair(subject, sessionId, refreshToken)), sessionId };
  }

  /**
   * Rotates a refresh token: consumes it (once, whatever the concurrency) and issues a new pair in the
   * same session. Reuse of a consumed token revokes the session. A deleted user's or a deactivated
   * operator's session is revoked and refused.
   */
  async refresh(refreshToken: string): Promise<{ pair: TokenPair; subject: RefreshedSubject }> {
    const { db } = this.deps;
    const tokenHash = hashRefreshToken(refreshToken);
    // The single atomic step: of N concurrent presentations, exactly one sees used_at still NULL.
    const [consumed] = await db('refresh_tokens')
      .where({ tokenHash })
      .whereNull('usedAt')
      .update({ usedAt: db.fn.now() })
      .returning(['sessionId', 'expiresAt']);

    if (!consumed) {
      const seen = await db('refresh_tokens').where({ tokenHash }).first('sessionId');
      if (seen) {
        // A rotated token came back: either the client or a thief holds a copy. End the family.
        const revoked = await revokeSession(db, seen.sessionId, 'refresh_token_reuse');
        if (revoked) {
          await recordAudit(db, { type: 'session.refresh_token_reused', severity: 'high', actorType: 'system', actorId: null, subjectType: 'session', subjectId: seen.sessionId });
          this.deps.logger?.warn({ sessionId: seen.sessionId }, 'refresh token reuse: session revoked');
        }
        this.deps.metrics?.outcome('auth_refresh', 'reuse');
      } else {
        this.deps.metrics?.outcome('auth_refresh', 'unknown');
      }
      throw invalidRefresh();
    }

    const session = await db('sessions').where({ id: consumed.sessionId }).first('id', 'subjectType', 'subjectId', 'revokedAt');
    if (!session) throw invalidRefresh();
    const subject = await this.currentSubject(session);
    if (session.revokedAt || new Date(consumed.expiresAt).getTime() <= Date.now()) {
      this.deps.metrics?.outcome('auth_refresh', 'refused');
      throw invalidRefresh();
    }

    const next = await this.insertRefreshToken(db, session.id);
    const pair = await this.pair({ type: session.subjectType, id: session.subjectId }, session.id, next);
    this.deps.metrics?.outcome('auth_refresh', 'ok');
    return { pair, subject };
  }

  /** The subject of a session, as it is now; a gone user or deactivated operator ends the session. */
  private async currentSubject(session: { id: string; subjectType: Audience; subjectId: string }): Promise<RefreshedSubject> {
    const { db } = this.deps;
    if (session.subjectType === 'consumer') {
      const user = await db('users').where({ id: session.subjectId }).first('deletedAt');
      if (!user || user.deletedAt) {
        await revokeSession(db, session.id, 'user_deleted');
        throw invalidRefresh();
      }
      return { type: 'consumer', userId: session.subjectId };
    }
    const op = await db('operators').where({ id: session.subjectId }).first('status', 'mustResetPassword');
    if (!op) {
      await revokeSession(db, session.id, 'operator_missing');
      throw invalidRefresh();
    }
    if (op.status !== 'active') {
      await revokeSession(db, session.id, 'operator_deactivated');
      throw new AppError('operator_deactivated', 'This operator account is deactivated');
    }
    return { type: 'operator', operatorId: session.subjectId, mustResetPassword: op.mustResetPassword };
  }

  /** Ends the session a refresh token belongs to (idempotent for a known token; unknown is 401). */
  async logout(refreshToken: string): Promise<void> {
    const row = await this.deps.db('refresh_tokens').where({ tokenHash: hashRefreshToken(refreshToken) }).first('sessionId');
    if (!row) throw invalidRefresh();
    await revokeSession(this.deps.db, row.sessionId, 'logout');
  }
}

/** A coarse, non-identifying hint of the client (the User-Agent cut short), kept with the session. */
function coarseDeviceHint(userAgent: string | null | undefined): string | null {
  if (!userAgent) return null;
  // eslint-disable-next-line no-control-regex
  return userAgent.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 120) || null;
}
