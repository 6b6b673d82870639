/**
 * The one authorisation layer: every route declares a rule (platform/http/route-table.ts) and this checks the
 * bearer token against it AND against current state in PostgreSQL, so a revoked session, a deleted
 * user, a deactivated or flagged operator is refused on the very next request.
 */
import { AppError } from '../../platform/errors.js';
import type { OperatorsRepository, SessionsRepository } from './operators-repository.js';
import type { UsersRepository } from '../users/index.js';
import type { AuthRule, RouteAuthorizer } from '../../platform/http/route-table.js';
import { bearerToken, type OperatorPrincipal, type Principal } from '../../platform/http/principal.js';
import type { AccessClaims, Audience, TokenService } from './token-service.js';

const AUDIENCES_OF: Record<Exclude<AuthRule, 'none'>, Audience[]> = {
  consumer: ['consumer'],
  'consumer:self': ['consumer'],
  operator: ['operator'],
  'operator:flagged-ok': ['operator'],
  'operator:mfa-setup': ['operator'],
  administrator: ['operator'],
  'consumer-or-operator': ['consumer', 'operator'],
};

export interface AuthorizerRepositories {
  sessions: SessionsRepository;
  users: UsersRepository;
  operators: OperatorsRepository;
}

const sessionEnded = (session: { revokedAt: Date | null } | undefined) => !session || session.revokedAt !== null;

export class Authorizer implements RouteAuthorizer<AccessClaims> {
  constructor(
    private readonly repos: AuthorizerRepositories,
    private readonly tokens: TokenService,
    /** STAFF_MFA: with `required`, an operator without a second factor may only set it up (and a password). */
    private readonly policy: { staffMfa: 'required' | 'optional'; staffSessionMaxSeconds?: number } = { staffMfa: 'optional' },
  ) {}

  /**
   * The stateless half: the bearer token's signature, expiry and audience for the rule, and the
   * `consumer:self` ownership rule. Touches no dependency. Null for `none`.
   */
  async verify(authorization: string | undefined, rule: AuthRule, params: Record<string, string>): Promise<AccessClaims | null> {
    if (rule === 'none') return null;
    const token = bearerToken(authorization);
    if (!token) throw new AppError('unauthorized', 'A bearer access token is required');
    const claims = await this.tokens.verifyAccess(token, AUDIENCES_OF[rule]);
    if (rule === 'consumer:self' && params.id !== claims.sub) {
      throw new AppError('forbidden', 'You can only access your own account');
    }
    return claims;
  }

  /**
   * The stateful half: the session, the user or operator as they are now in PostgreSQL. No principal
   * for `none`; for any other rule, the principal that rule admits (platform/http/route-table.ts, PrincipalOf).
   */
  async current(claims: AccessClaims | null, rule: AuthRule): Promise<Principal | undefined> {
    if (rule === 'none' || !claims) return undefined;
    if (rule === 'consumer-or-operator' && claims.aud === 'operator') return this.operatorNow(claims.sub, claims.sid, 'operator');
    if (rule !== 'consumer' && rule !== 'consumer:self' && rule !== 'consumer-or-operator') return this.operatorNow(claims.sub, claims.sid, rule);

    // The session and the subject are read together; the subject's state is reported first, so that a
    // deleted user is told 404 and a deactivated operator 403 `operator_deactivated` even when their
    // sessions were revoked along with the deletion or deactivation (SPEC section 7).
    const [session, deletedAt] = await Promise.all([
      this.repos.sessions.findOf(claims.sid, { type: 'consumer', id: claims.sub }),
      this.repos.users.deletedAt(claims.sub),
    ]);
    if (deletedAt !== null) throw new AppError('not_found', 'User not found');
    if (sessionEnded(session)) throw new AppError('unauthorized', 'The session has ended');
    return { kind: 'consumer', userId: claims.sub, sessionId: claims.sid };
  }

  /**
   * An operator's session as it is right now, against an operator rule: what every operator route
   * and the queue dashboard's cookie (features/system/queue-dashboard.ts) are checked with.
   */
  async operatorNow(
    operatorId: string,
    sessionId: string,
    rule: Extract<AuthRule, 'operator' | 'operator:flagged-ok' | 'operator:mfa-setup' | 'administrator'>,
  ): Promise<OperatorPrincipal> {
    const [session, op] = await Promise.all([
      this.repos.sessions.findOf(sessionId, { type: 'operator', id: operatorId }),
      this.repos.operators.authState(operatorId),
    ]);
    if (!op) throw new AppError('unauthorized', 'The operator no longer exists');
    if (op.status !== 'active') throw new AppError('operator_deactivated', 'This operator account is deactivated');
    if (sessionEnded(session)) throw new AppError('unauthorized', 'The session has ended');
    // A staff session ends STAFF_SESSION_MAX_SECONDS after sign-in, its access tokens with it.
    const max = this.policy.staffSessionMaxSeconds;
    if (max && Date.now() - new Date(session!.createdAt).getTime() > max * 1000)
      throw new AppError('unauthorized', 'The session has reached its maximum lifetime; sign in again');
    if (op.mustResetPassword && rule !== 'operator:flagged-ok') {
      throw new AppError('password_reset_required', 'Set a new password first (POST /auth/operator/set-password)');
    }
    if (this.policy.staffMfa === 'required' && !op.mfaEnabledAt && rule !== 'operator:flagged-ok' && rule !== 'operator:mfa-setup') {
      throw new AppError('mfa_setup_required', 'Set up a second factor first (POST /auth/operator/mfa/setup, then /auth/operator/mfa/confirm)');
    }
    if (rule === 'administrator' && op.role !== 'administrator') {
      throw new AppError('forbidden', 'Administrators only');
    }
    return {
      kind: 'operator',
      operatorId,
      role: op.role,
      orgId: op.orgId,
      sessionId,
      mustResetPassword: op.mustResetPassword,
    };
  }
}
