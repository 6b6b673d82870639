/**
 * Sessions and their token pairs. A session row is what an access token's `sid` names and what the
 * authorisation layer checks on every request; a refresh token belongs to one session.
 *
 * Refresh tokens are opaque (32 random bytes, base64url: 256 bits), stored only as SHA-256, valid for
 * REFRESH_TOKEN_TTL_SECONDS and rotated on every /auth/refresh. Unlike link and proof tokens they live
 * in PostgreSQL, not Redis: a consumed token must be remembered, since presenting it again is treated
 * as theft and revokes the whole session (its family of refresh tokens and every access token naming
 * it) at once. Consumption is a conditional UPDATE (SessionsRepository.takeRefreshToken): exactly one
 * concurrent use wins.
 */
import type { Knex } from 'knex';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { AuditEventsRepository } from '../../platform/events/audit.js';
import { OperatorsRepository, SessionsRepository, type SessionSubject } from './operators-repository.js';
import type { UsersRepository } from '../users/index.js';
import { hashToken, newToken } from '../../platform/redis/single-use-token.js';
import type { Metrics } from '../../platform/metrics.js';
import type { Audience, TokenService } from './token-service.js';

export interface TokenPair {
  accessToken: string;
  refreshToken: string;
  tokenType: 'Bearer';
  expiresIn: number;
  refreshExpiresIn: number;
}

export type { SessionSubject };

/** What a refreshed pair belongs to (the response repeats `userId` or `operatorId` + `mustResetPassword`). */
export type RefreshedSubject = { type: 'consumer'; userId: string } | { type: 'operator'; operatorId: string; mustResetPassword: boolean };

export interface SessionDeps {
  auditEvents: AuditEventsRepository;
  sessions: SessionsRepository;
  users: UsersRepository;
  operators: OperatorsRepository;
  tokens: TokenService;
  config: Pick<Config, 'security' | 'operators'>;
  metrics?: Metrics;
  logger?: Logger;
}

const invalidRefresh = () => new AppError('invalid_refresh_token', 'The refresh token is not valid; sign in again');

/** Housekeeping of the web process (processes/web/http-server.ts), which holds a knex rather than the service graph. */
export const pruneExpiredRefreshTokens = (db: Knex, graceDays?: number) => new SessionsRepository(db).pruneExpiredRefreshTokens(graceDays);

export class SessionService {
  constructor(private readonly deps: SessionDeps) {}

  /**
   * Seconds a new refresh token of this session lives. A staff session's token lives only the idle
   * limit (an unused session dies after STAFF_SESSION_IDLE_SECONDS) and never past the session's
   * absolute end (STAFF_SESSION_MAX_SECONDS after sign-in): one stolen staff token is not 30 days of
   * 1:N search. Consumers keep REFRESH_TOKEN_TTL_SECONDS.
   */
  private ttlMsFor(subjectType: SessionSubject['type'], sessionCreatedAt: Date): number {
    const {
      security: { refreshTokenTtlSeconds },
      operators: { staffSessionIdleSeconds, staffSessionMaxSeconds },
    } = this.deps.config;
    if (subjectType !== 'operator') return refreshTokenTtlSeconds * 1000;
    const leftOfSession = sessionCreatedAt.getTime() + staffSessionMaxSeconds * 1000 - Date.now();
    return Math.max(0, Math.min(refreshTokenTtlSeconds * 1000, staffSessionIdleSeconds * 1000, leftOfSession));
  }

  private async insertRefreshToken(sessionId: string, ttlMs: number): Promise<string> {
    const token = newToken();
    await this.deps.sessions.insertRefreshToken(sessionId, hashToken(token), new Date(Date.now() + ttlMs));
    return token;
  }

  private async pair(subject: SessionSubject, sessionId: string, refreshToken: string, refreshTtlMs: number): Promise<TokenPair> {
    const { token, expiresIn } = await this.deps.tokens.signAccess({ sub: subject.id, aud: subject.type, sid: sessionId });
    return { accessToken: token, refreshToken, tokenType: 'Bearer', expiresIn, refreshExpiresIn: Math.floor(refreshTtlMs / 1000) };
  }

  /**
   * Opens a new session for a subject that has just proven who it is, and returns its first pair. Every
   * sign-in, consumer (one-time code) and staff (password, and second factor when enabled), ends here:
   * it is audited as `auth.signed_in` with the session id (and the request's address and user agent).
   */
  async open(subject: SessionSubject, opts: { deviceHint?: string | null } = {}): Promise<{ pair: TokenPair; sessionId: string }> {
    const ttl = this.ttlMsFor(subject.type, new Date());
    const refreshToken = newToken();
    const sessionId = await this.deps.sessions.openWithRefreshToken(subject, coarseDeviceHint(opts.deviceHint), {
      tokenHash: hashToken(refreshToken),
      expiresAt: new Date(Date.now() + ttl),
    });
    const subjectType = subject.type === 'consumer' ? 'user' : 'operator';
    await this.deps.auditEvents.record({
      type: 'auth.signed_in',
      actorType: subject.type,
      actorId: subject.id,
      subjectType,
      subjectId: subject.id,
      data: { method: subject.type === 'consumer' ? 'otp' : 'password', sessionId },
    });
    return { pair: await this.pair(subject, sessionId, refreshToken, ttl), sessionId };
  }

  /**
   * Rotates a refresh token: consumes it (once, whatever the concurrency) and issues a new pair in the
   * same session. Reuse of a consumed token revokes the session. A deleted user's or a deactivated
   * operator's session is revoked and refused.
   */
  async refresh(refreshToken: string): Promise<{ pair: TokenPair; subject: RefreshedSubject }> {
    const { sessions, metrics, logger } = this.deps;
    const tokenHash = hashToken(refreshToken);
    const consumed = await sessions.takeRefreshToken(tokenHash);

    if (!consumed) {
      const sessionId = await sessions.sessionOfRefreshToken(tokenHash);
      if (sessionId) {
        // A rotated token came back: either the client or a thief holds a copy. End the family.
        if (await sessions.revoke(sessionId, 'refresh_token_reuse')) {
          await this.deps.auditEvents.record({
            type: 'session.refresh_token_reused',
            severity: 'high',
            actorType: 'system',
            actorId: null,
            subjectType: 'session',
            subjectId: sessionId,
          });
          logger?.warn({ sessionId }, 'refresh token reuse: session revoked');
        }
        metrics?.outcome('auth_refresh', 'reuse');
      } else {
        metrics?.outcome('auth_refresh', 'unknown');
      }
      throw invalidRefresh();
    }

    const session = await sessions.find(consumed.sessionId);
    if (!session) throw invalidRefresh();
    const subject = await this.currentSubject(session);
    // Past its idle limit the token has expired; past the absolute limit a staff session has no time left.
    const ttl = this.ttlMsFor(session.subjectType, new Date(session.createdAt));
    if (session.revokedAt || new Date(consumed.expiresAt).getTime() <= Date.now() || ttl <= 0) {
      metrics?.outcome('auth_refresh', 'refused');
      throw invalidRefresh();
    }

    const next = await this.insertRefreshToken(session.id, ttl);
    const pair = await this.pair({ type: session.subjectType, id: session.subjectId }, session.id, next, ttl);
    metrics?.outcome('auth_refresh', 'ok');
    return { pair, subject };
  }

  /** The subject of a session, as it is now; a gone user or deactivated operator ends the session. */
  private async currentSubject(session: { id: string; subjectType: Audience; subjectId: string }): Promise<RefreshedSubject> {
    const { sessions, users, operators } = this.deps;
    if (session.subjectType === 'consumer') {
      if ((await users.deletedAt(session.subjectId)) !== null) {
        await sessions.revoke(session.id, 'user_deleted');
        throw invalidRefresh();
      }
      return { type: 'consumer', userId: session.subjectId };
    }
    const op = await operators.find(session.subjectId);
    if (!op) {
      await sessions.revoke(session.id, 'operator_missing');
      throw invalidRefresh();
    }
    if (op.status !== 'active') {
      await sessions.revoke(session.id, 'operator_deactivated');
      throw new AppError('operator_deactivated', 'This operator account is deactivated');
    }
    return { type: 'operator', operatorId: session.subjectId, mustResetPassword: op.mustResetPassword };
  }

  /** Ends the session a refresh token belongs to (idempotent for a known token; unknown is 401). */
  async logout(refreshToken: string): Promise<void> {
    const sessionId = await this.deps.sessions.sessionOfRefreshToken(hashToken(refreshToken));
    if (!sessionId) throw invalidRefresh();
    await this.deps.sessions.revoke(sessionId, 'logout');
  }
}

/** A coarse, non-identifying hint of the client (the User-Agent cut short), kept with the session. */
function coarseDeviceHint(userAgent: string | null | undefined): string | null {
  if (!userAgent) return null;
  return userAgent.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, 120) || null;
}
