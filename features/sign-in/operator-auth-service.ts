/**
 * Operator credentials: sign-in and setting one's own password.
 *
 * - An unknown identifier and a wrong password get the same 401 `invalid_credentials`, after the same
 *   work (an unknown identifier is checked against a dummy scrypt hash of the same cost).
 * - OPERATOR_MAX_FAILED_LOGINS wrong passwords in a row lock the account (403 `account_locked`, an
 *   AuditEvent of severity high); while locked even the right password is refused, and only an
 *   administrator's reset-password unlocks. The counter moves by conditional UPDATEs, so concurrent
 *   guesses cannot overshoot the limit or slip past a lock. A success resets the counter.
 * - A deactivated operator with the right password gets 403 `operator_deactivated` (with a wrong one,
 *   the ordinary 401: the answer says nothing to someone who does not know the password).
 * - Set-password checks the current password under the same counter, so a stolen access token cannot
 *   be used to guess it without limit.
 */
import { createHash } from 'node:crypto';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { AuditEventsRepository } from '../../platform/events/audit.js';
import type { UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { OperatorsRepository, SessionsRepository } from './operators-repository.js';
import type { LoginAttemptStore } from './login-attempts.js';
import { ipBucket } from '../../platform/http/client-address.js';
import type { Metrics } from '../../platform/metrics.js';
import { burnPasswordCheck, hashPassword, needsRehash, verifyPassword } from './passwords.js';
import type { SessionService, TokenPair } from './session-service.js';
import type { MfaService } from './mfa-service.js';
import { weakPasswordReason } from './password-policy.js';

export interface OperatorAuthDeps {
  unitOfWork: UnitOfWork;
  auditEvents: AuditEventsRepository;
  operators: OperatorsRepository;
  sessionRows: SessionsRepository;
  attempts: LoginAttemptStore;
  config: Pick<Config, 'operators'>;
  sessions: SessionService;
  mfa: MfaService;
  metrics?: Metrics;
  logger?: Logger;
}

const invalidCredentials = () => new AppError('invalid_credentials', 'The identifier or the password is wrong');
const locked = () => new AppError('account_locked', 'This account is locked after too many failed sign-ins; an administrator must reset its password');
const deactivated = () => new AppError('operator_deactivated', 'This operator account is deactivated');
const mfaRequired = () => new AppError('mfa_required', 'Enter the current code of your authenticator app (or an unused recovery code) as `otp`');

export type OperatorSignIn = TokenPair & { operatorId: string; mustResetPassword: boolean; mfaSetupRequired?: true };

export class OperatorAuthService {
  constructor(private readonly deps: OperatorAuthDeps) {}

  /**
   * POST /auth/operator/login. Two caps per client address, both before any password hashing (each
   * attempt costs a memory-hard hash): attempts per address AND identifier (guessing one account from an
   * office's NAT does not lock the colleagues behind it out), and failures per address whatever the
   * identifier (password spraying; successes never count, so working operators are not blocked).
   */
  async login(identifier: string, password: string, opts: { deviceHint?: string | null; ip?: string; otp?: string } = {}): Promise<OperatorSignIn> {
    const { attempts, config, metrics } = this.deps;
    const address = opts.ip ? ipBucket(opts.ip) : undefined;
    if (address) {
      const failures = await attempts.failures(address);
      if (failures.count >= config.operators.loginFailuresPerIpPerHour) {
        metrics?.outcome('operator_login', 'rate_limited');
        throw new AppError('rate_limited', 'Too many failed sign-ins from this address; try again later', {
          retryAfter: Math.max(1, Math.ceil(failures.ttlMs / 1000)),
        });
      }
      const account = createHash('sha256').update(identifier.normalize('NFC').toLowerCase()).digest('hex').slice(0, 24);
      const { count, resetInSeconds } = await attempts.countAttempt(address, account);
      if (count > config.operators.loginsPerIpPerHour) {
        metrics?.outcome('operator_login', 'rate_limited');
        throw new AppError('rate_limited', 'Too many sign-in attempts for this account from this address; try again later', { retryAfter: resetInSeconds });
      }
    }
    try {
      return await this.checkCredentials(identifier, password, opts);
    } catch (e) {
      if (address && e instanceof AppError && (e.code === 'invalid_credentials' || e.code === 'account_locked' || (e.code === 'mfa_required' && opts.otp))) {
        await attempts.countFailure(address).catch(() => {});
      }
      throw e;
    }
  }

  private async checkCredentials(identifier: string, password: string, opts: { deviceHint?: string | null; otp?: string }): Promise<OperatorSignIn> {
    const { operators, metrics, config } = this.deps;
    let op = await operators.findByIdentifier(identifier);
    if (!op) {
      await burnPasswordCheck(password);
      metrics?.outcome('operator_login', 'invalid_credentials');
      throw invalidCredentials();
    }
    // An administrator's lock lapses after ADMIN_LOCK_SECONDS: whoever knows an administrator's sign-in
    // name can lock it, and the organisation must not lose its last administrator to that.
    if (
      op.lockedAt &&
      op.role === 'administrator' &&
      config.operators.adminLockSeconds > 0 &&
      Date.now() - new Date(op.lockedAt).getTime() >= config.operators.adminLockSeconds * 1000
    ) {
      if (await operators.unlockIfLockedAt(op.id, op.lockedAt)) {
        await this.deps.auditEvents.record({
          type: 'operator.unlocked',
          actorType: 'system',
          actorId: null,
          subjectType: 'operator',
          subjectId: op.id,
          data: { via: 'admin_lock_expired', lockSeconds: config.operators.adminLockSeconds },
        });
      }
      op = Object.assign(op, { lockedAt: null, failedLoginCount: 0 });
    }
    // Always the full check first: the time taken says nothing about the account's state.
    const ok = await verifyPassword(password, op.passwordHash);
    if (op.lockedAt) {
      metrics?.outcome('operator_login', 'locked');
      throw locked();
    }
    if (!ok) await this.recordFailure(op.id, 'login');
    if (op.status !== 'active') {
      metrics?.outcome('operator_login', 'deactivated');
      throw deactivated();
    }
    // A temporary password (new operator, reset) is good for TEMP_PASSWORD_TTL_SECONDS only.
    if (op.mustResetPassword && Date.now() - new Date(op.passwordSetAt).getTime() > config.operators.tempPasswordTtlSeconds * 1000) {
      metrics?.outcome('operator_login', 'temporary_password_expired');
      throw new AppError('temporary_password_expired', 'This temporary password has expired; ask an administrator for a new one');
    }
    // The second factor, when enabled: missing → 401 `mfa_required`; wrong → the same, counted as a failed sign-in.
    if (op.mfaEnabledAt) {
      if (!opts.otp) {
        metrics?.outcome('operator_login', 'mfa_required');
        throw mfaRequired();
      }
      if (!(await this.deps.mfa.check(op, opts.otp))) await this.recordFailure(op.id, 'login_otp', undefined, mfaRequired);
    }

    const rehash = needsRehash(op.passwordHash) ? await hashPassword(password) : null;
    // Success clears the counter, unless a concurrent failure locked the account meanwhile.
    const row = await operators.clearFailures(op.id, rehash);
    if (!row) throw locked();
    if (row.status !== 'active') throw deactivated();

    const { pair } = await this.deps.sessions.open({ type: 'operator', id: op.id }, { deviceHint: opts.deviceHint });
    metrics?.outcome('operator_login', 'ok');
    return {
      ...pair,
      operatorId: op.id,
      mustResetPassword: row.mustResetPassword,
      ...(this.deps.mfa.setupRequired(op) ? { mfaSetupRequired: true as const } : {}),
    };
  }

  /**
   * Counts one failed password check; throws 401 `invalid_credentials`, or 403 `account_locked` when
   * this failure reached the limit (or the account was locked meanwhile).
   */
  private async recordFailure(
    operatorId: string,
    via: 'login' | 'login_otp' | 'set_password',
    sessionId?: string,
    otherwise: () => AppError = invalidCredentials,
  ): Promise<never> {
    const { config, metrics } = this.deps;
    const row = await this.deps.operators.countFailure(operatorId, config.operators.maxFailedLogins);
    if (!row) throw locked();
    if (row.lockedAt) {
      await this.deps.auditEvents.record({
        type: 'operator.locked',
        severity: 'high',
        actorType: 'system',
        actorId: null,
        subjectType: 'operator',
        subjectId: operatorId,
        data: { failedAttempts: row.failedLoginCount, via },
      });
      // Guessing through set-password needs a session: that session ends with the lock.
      if (sessionId) await this.deps.sessionRows.revoke(sessionId, 'account_locked');
      metrics?.outcome('operator_login', 'locked');
      this.deps.logger?.warn({ operatorId, via }, 'operator account locked after failed password checks');
      throw locked();
    }
    const error = otherwise();
    metrics?.outcome(via === 'set_password' ? 'operator_set_password' : 'operator_login', error.code);
    throw error;
  }

  /**
   * POST /auth/operator/set-password (accepted while flagged): checks the current password, stores the
   * new one, clears the flag, and ends the operator's other sessions.
   */
  async setPassword(operatorId: string, sessionId: string, currentPassword: string, newPassword: string): Promise<{ status: 'password_set' }> {
    const { operators } = this.deps;
    const op = await operators.find(operatorId);
    if (!op) throw new AppError('unauthorized', 'The operator no longer exists');
    const ok = await verifyPassword(currentPassword, op.passwordHash);
    if (op.lockedAt) throw locked();
    if (!ok) await this.recordFailure(operatorId, 'set_password', sessionId);
    if (newPassword.normalize('NFC') === currentPassword.normalize('NFC')) {
      throw new AppError('validation_failed', 'The request is not valid', {
        details: { errors: [{ in: 'body', path: '/newPassword', message: 'must differ from the current password' }] },
      });
    }
    const weak = weakPasswordReason(newPassword, { identifier: op.identifier });
    if (weak) throw new AppError('weak_password', `Choose another password: ${weak}`);
    const passwordHash = await hashPassword(newPassword);
    await this.deps.unitOfWork.run(async (trx) => {
      const updated = await operators.update(operatorId, { passwordHash, mustResetPassword: false, failedLoginCount: 0 }, { unlockedOnly: true }, trx);
      if (!updated) throw locked();
      const revoked = await this.deps.sessionRows.revokeAllOf({ type: 'operator', id: operatorId }, 'password_changed', { exceptSessionId: sessionId }, trx);
      await this.deps.auditEvents.record(
        {
          type: 'operator.password_set',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'operator',
          subjectId: operatorId,
          data: { wasFlagged: op.mustResetPassword, otherSessionsRevoked: revoked },
        },
        trx,
      );
    });
    this.deps.metrics?.outcome('operator_set_password', 'ok');
    return { status: 'password_set' };
  }
}
