/**
 * Operator credentials: sign-in and setting one's own password.
 *
 * - An unknown identifier and a wrong password get the same 401 `invalid_credentials`, after the same
 *   work (an unknown identifier is checked against a dummy scrypt hash of the same cost).
 * - OPERATOR_MAX_FAILED_LOGINS failed sign-ins in a row (a wrong password or a wrong `otp`) lock the
 *   account (an AuditEvent `operator.locked` of severity high). While locked, a wrong password answers
 *   401 `invalid_credentials` exactly as for an unknown identifier (a stranger learns nothing, not even
 *   that the lock exists); only the right password is told 403 `account_locked`.
 * - Staff devices (staff-devices.ts): a sign-in that presents a usable `deviceToken` of the account is
 *   judged by that device's own count, not the account's, and the account's lock does not apply to it:
 *   a stranger who knows an identifier can lock the account for every other browser, never for the
 *   devices its owner signed in from before. An operator stays locked until a reset; an administrator's lock
 *   lapses after ADMIN_LOCK_SECONDS, doubling per lock up to 24 h, with the count running on to
 *   STAFF_MAX_FAILURES, which locks until a reset (see lockPolicy). The counter and the lock move by one
 *   conditional UPDATE, so concurrent guesses cannot overshoot a limit or slip past a lock. Only a
 *   success (or a reset) clears the counter.
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
import type { LockPolicy, OperatorsRepository, SessionsRepository } from './operators-repository.js';
import type { Operator } from '../../models/index.js';
import type { LoginAttemptStore } from './login-attempts.js';
import { ipBucket } from '../../platform/http/client-address.js';
import type { Metrics } from '../../platform/metrics.js';
import { SIGN_IN_METRICS } from './metrics.js';
import { burnPasswordCheck, hashPassword, needsRehash, verifyPassword } from './passwords.js';
import type { SessionService, TokenPair } from './session-service.js';
import type { MfaService } from './mfa-service.js';
import { weakPasswordReason } from './password-policy.js';
import type { StaffDevice, StaffDeviceTokens, StaffDevicesRepository } from './staff-devices.js';

export interface OperatorAuthDeps {
  unitOfWork: UnitOfWork;
  auditEvents: AuditEventsRepository;
  operators: OperatorsRepository;
  sessionRows: SessionsRepository;
  attempts: LoginAttemptStore;
  config: Pick<Config, 'operators'>;
  sessions: SessionService;
  mfa: MfaService;
  devices: StaffDevicesRepository;
  deviceTokens: StaffDeviceTokens;
  metrics?: Metrics;
  logger?: Logger;
}

interface LoginOptions {
  deviceHint?: string | null;
  ip?: string;
  otp?: string;
  deviceToken?: string;
}

const invalidCredentials = () => new AppError('invalid_credentials', 'The identifier or the password is wrong');
const locked = (until?: Date | null) =>
  until
    ? new AppError('account_locked', 'This account is locked after too many failed sign-ins; try again later')
    : new AppError('account_locked', 'This account is locked after too many failed sign-ins; an administrator must reset its password');

/** The longest lapsing lock (SPEC 13.3: doubling up to 24 h). */
const ADMIN_MAX_LOCK_SECONDS = 86_400;
const deactivated = () => new AppError('operator_deactivated', 'This operator account is deactivated');
const mfaRequired = () => new AppError('mfa_required', 'Enter the current code of your authenticator app (or an unused recovery code) as `otp`');

export type OperatorSignIn = TokenPair & { operatorId: string; mustResetPassword: boolean; mfaSetupRequired?: true; deviceToken: string };

export class OperatorAuthService {
  constructor(private readonly deps: OperatorAuthDeps) {}

  /**
   * POST /auth/operator/login. Two caps per client address, both before any password hashing (each
   * attempt costs a memory-hard hash): attempts per address AND identifier (guessing one account from an
   * office's NAT does not lock the colleagues behind it out), and failures per address whatever the
   * identifier (password spraying; successes never count, so working operators are not blocked).
   */
  async login(identifier: string, password: string, opts: LoginOptions = {}): Promise<OperatorSignIn> {
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
      if (e instanceof AppError) await this.signInFailed(identifier, e.code, Boolean(opts.otp));
      throw e;
    }
  }

  /**
   * Audits a refused staff sign-in (`auth.sign_in_failed`, the answered code as `reason`), naming the
   * operator when the identifier is one (never the identifier typed: it may be a mistyped password). A
   * missing second factor is the first step of a two-step sign-in, not a failure.
   */
  private async signInFailed(identifier: string, reason: string, otpSent: boolean): Promise<void> {
    if ((reason === 'mfa_required' && !otpSent) || reason === 'dependency_unavailable') return;
    try {
      const op = await this.deps.operators.findByIdentifier(identifier);
      await this.deps.auditEvents.record({
        type: 'auth.sign_in_failed',
        actorType: 'anonymous',
        actorId: null,
        subjectType: op ? 'operator' : null,
        subjectId: op?.id ?? null,
        data: { method: 'password', reason, ...(otpSent ? { secondFactor: true } : {}) },
      });
    } catch (e) {
      // The refusal stands: a failed audit write must not turn a 401 into a 500.
      this.deps.logger?.warn({ err: (e as Error).message, reason }, 'refused staff sign-in not audited');
    }
  }

  private async checkCredentials(identifier: string, password: string, opts: LoginOptions): Promise<OperatorSignIn> {
    const { operators, metrics, config } = this.deps;
    const op = await operators.findByIdentifier(identifier);
    if (!op) {
      await burnPasswordCheck(password);
      metrics?.outcome('operator_login', 'invalid_credentials');
      throw invalidCredentials();
    }
    // Always the full check first: the time taken says nothing about the account's state.
    const ok = await verifyPassword(password, op.passwordHash);
    const device = opts.deviceToken ? await this.deps.devices.usable(op.id, this.deps.deviceTokens.hash(opts.deviceToken)) : undefined;
    // A known device is judged by its own count; every other sign-in by the account's.
    const fail = (via: 'login' | 'login_otp', otherwise: () => AppError = invalidCredentials): Promise<never> =>
      device ? this.deviceFailure(device, op, otherwise) : this.recordFailure(op, via, undefined, otherwise);
    if (!device && op.isLockedNow()) {
      // Locked: a wrong password is answered as for an unknown identifier, uncounted (the lock holds).
      if (!ok) {
        metrics?.outcome('operator_login', 'invalid_credentials');
        throw invalidCredentials();
      }
      metrics?.outcome('operator_login', 'locked');
      throw locked(op.lockedUntil);
    }
    if (!ok) await fail('login');
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
      if (!(await this.deps.mfa.check(op, opts.otp))) await fail('login_otp', mfaRequired);
    }

    const rehash = needsRehash(op.passwordHash) ? await hashPassword(password) : null;
    let mustResetPassword = op.mustResetPassword;
    let deviceToken: string;
    if (device) {
      // The account's count is a stranger's doing: a known device neither needs nor clears it.
      await this.deps.devices.used(device.id);
      if (rehash) await operators.update(op.id, { passwordHash: rehash });
      deviceToken = opts.deviceToken!;
    } else {
      // Success clears the counter, unless a concurrent failure locked the account meanwhile.
      const row = await operators.clearFailures(op.id, rehash);
      if (!row) throw locked();
      if (row.status !== 'active') throw deactivated();
      mustResetPassword = row.mustResetPassword;
      deviceToken = this.deps.deviceTokens.newToken();
      await this.deps.devices.purgeExpired(op.id);
      await this.deps.devices.issue(op.id, this.deps.deviceTokens.hash(deviceToken), config.operators.staffDeviceTtlDays);
    }

    const { pair } = await this.deps.sessions.open({ type: 'operator', id: op.id }, { deviceHint: opts.deviceHint });
    metrics?.outcome('operator_login', 'ok');
    return {
      ...pair,
      operatorId: op.id,
      mustResetPassword,
      ...(this.deps.mfa.setupRequired(op) ? { mfaSetupRequired: true as const } : {}),
      deviceToken,
    };
  }

  /**
   * Counts one failed sign-in on a known device: OPERATOR_MAX_FAILED_LOGINS in a row lock the device
   * (audited `operator.device_locked`), never the account. Always answers as a failure would (401).
   */
  private async deviceFailure(device: StaffDevice, op: Pick<Operator, 'id' | 'role'>, otherwise: () => AppError): Promise<never> {
    const counted = await this.deps.devices.countFailure(device.id, this.deps.config.operators.maxFailedLogins);
    if (counted?.locked) {
      await this.deps.auditEvents.record({
        type: 'operator.device_locked',
        severity: 'high',
        actorType: 'system',
        actorId: null,
        subjectType: 'operator',
        subjectId: op.id,
        data: { failedAttempts: counted.failedCount, deviceId: device.id },
      });
      this.deps.logger?.warn({ operatorId: op.id, deviceId: device.id }, 'staff device locked after failed sign-ins');
    }
    const error = otherwise();
    this.deps.metrics?.outcome('operator_login', error.code);
    throw error;
  }

  /**
   * The lock policy of SPEC 13.3: an operator is locked at OPERATOR_MAX_FAILED_LOGINS failures until a
   * reset. An administrator's lock lapses (whoever knows its sign-in name can lock it, and the
   * organisation must not lose its last administrator to that), but the failure count runs on across
   * the windows, each lock twice as long as the one before, and STAFF_MAX_FAILURES failures lock it
   * until a reset: a phished password's second factor gets that many guesses, not 5 every 15 minutes.
   */
  private lockPolicy(role: Operator['role']): LockPolicy {
    const { maxFailedLogins, adminLockSeconds, staffMaxFailures } = this.deps.config.operators;
    if (role !== 'administrator' || adminLockSeconds === 0) {
      return { lockEvery: maxFailedLogins, permanentAfter: maxFailedLogins, firstLockSeconds: 0, maxLockSeconds: 0 };
    }
    return {
      lockEvery: maxFailedLogins,
      permanentAfter: Math.max(staffMaxFailures, maxFailedLogins),
      firstLockSeconds: adminLockSeconds,
      maxLockSeconds: Math.max(ADMIN_MAX_LOCK_SECONDS, adminLockSeconds),
    };
  }

  /**
   * Counts one failed sign-in (a wrong password or a wrong second factor); throws 401
   * `invalid_credentials` (or `otherwise`), or 403 `account_locked` when this failure locked the account
   * (audited `operator.locked`, counted in `operator_locks_total`) or it was locked meanwhile.
   */
  private async recordFailure(
    op: Pick<Operator, 'id' | 'role'>,
    via: 'login' | 'login_otp' | 'set_password' | 'mfa_change',
    sessionId?: string,
    otherwise: () => AppError = invalidCredentials,
  ): Promise<never> {
    const { metrics } = this.deps;
    const row = await this.deps.operators.countFailure(op.id, this.lockPolicy(op.role));
    // At sign-in, a lock is never announced to whoever typed a wrong secret (SPEC 14.2); set-password
    // has a session, whose owner is told.
    const signingIn = via === 'login' || via === 'login_otp';
    if (!row) throw signingIn ? otherwise() : locked();
    if (row.lockedAt) {
      const lockedUntil = row.lockedUntil ? new Date(row.lockedUntil) : null;
      await this.deps.auditEvents.record({
        type: 'operator.locked',
        severity: 'high',
        actorType: 'system',
        actorId: null,
        subjectType: 'operator',
        subjectId: op.id,
        data: {
          failedAttempts: row.failedLoginCount,
          via,
          lockedUntil: lockedUntil?.toISOString() ?? null,
          lockSeconds: lockedUntil ? Math.round((lockedUntil.getTime() - new Date(row.lockedAt).getTime()) / 1000) : null,
        },
      });
      // Guessing through set-password needs a session: that session ends with the lock.
      if (sessionId) await this.deps.sessionRows.revoke(sessionId, 'account_locked');
      metrics?.outcome('operator_login', 'locked');
      metrics?.counter(SIGN_IN_METRICS.operatorLocks).inc({ role: op.role, kind: lockedUntil ? 'lapsing' : 'until_reset' });
      this.deps.logger?.warn({ operatorId: op.id, via, lockedUntil }, 'operator account locked after failed sign-ins');
      throw signingIn ? otherwise() : locked(lockedUntil);
    }
    const error = otherwise();
    metrics?.outcome(signingIn ? 'operator_login' : `operator_${via}`, error.code);
    throw error;
  }

  /**
   * The current password of a signed-in operator, asked before a change of its second factor (a stolen
   * session alone must not enrol the thief's authenticator). A wrong one is 401 `invalid_credentials`
   * and counts toward the account's lock, as at sign-in; the lock ends the session.
   */
  async confirmPassword(operatorId: string, sessionId: string, password: string): Promise<void> {
    const op = await this.deps.operators.find(operatorId);
    if (!op) throw new AppError('unauthorized', 'The operator no longer exists');
    const ok = await verifyPassword(password, op.passwordHash);
    if (op.isLockedNow()) throw locked(op.lockedUntil);
    if (!ok) await this.recordFailure(op, 'mfa_change', sessionId);
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
    if (op.isLockedNow()) throw locked(op.lockedUntil);
    if (!ok) await this.recordFailure(op, 'set_password', sessionId);
    if (newPassword.normalize('NFC') === currentPassword.normalize('NFC')) {
      throw new AppError('validation_failed', 'The request is not valid', {
        details: { errors: [{ in: 'body', path: '/newPassword', message: 'must differ from the current password' }] },
      });
    }
    const weak = weakPasswordReason(newPassword, { identifier: op.identifier });
    if (weak) throw new AppError('weak_password', `Choose another password: ${weak}`);
    const passwordHash = await hashPassword(newPassword);
    await this.deps.unitOfWork.run(async (trx) => {
      const updated = await operators.update(
        operatorId,
        { passwordHash, mustResetPassword: false, failedLoginCount: 0, lockedAt: null, lockedUntil: null },
        { unlockedOnly: true },
        trx,
      );
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
