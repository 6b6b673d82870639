/**
 * The staff second factor (TOTP, RFC 6238) and its recovery codes:
 * - setup: a new secret, sealed at rest for the key ring's `totp-secrets` purpose (the operator id as
 *   subject, platform/keys/README.md), pending until confirmed; answered
 *   once as `{ secret, otpauthUri }` for the authenticator app;
 * - confirm: the first right code enables it and answers 10 single-use recovery codes, shown once;
 * - sign-in: `check` accepts a code of a step not used before (no replay within its window) or an
 *   unused recovery code (once, whatever the concurrency);
 * - reset: an administrator clears it (audited; the operator's sessions end).
 */
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { AuditEventsRepository } from '../../platform/events/audit.js';
import type { UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { OperatorMfaRepository } from './operator-mfa-repository.js';
import type { OperatorsRepository, SessionsRepository } from './operators-repository.js';
import type { Operator } from '../../models/index.js';
import { hashRecoveryCode, looksLikeRecoveryCode, newRecoveryCode, RECOVERY_CODE_COUNT } from './recovery-codes.js';
import type { KeyRing } from '../../platform/keys/key-ring.js';
import { matchingStep, newTotpSecret, totpUri } from './totp.js';
import type { Metrics } from '../../platform/metrics.js';

export interface MfaDeps {
  unitOfWork: UnitOfWork;
  auditEvents: AuditEventsRepository;
  operators: OperatorsRepository;
  mfa: OperatorMfaRepository;
  sessionRows: SessionsRepository;
  config: Pick<Config, 'operators'>;
  keyRing: KeyRing;
  metrics?: Metrics;
  logger?: Logger;
}

export type SecondFactorUsed = 'totp' | 'recovery_code';

export class MfaService {
  constructor(private readonly deps: MfaDeps) {}

  private seal(operatorId: string, secret: string): string {
    return this.deps.keyRing.sealText('totp-secrets', secret, operatorId);
  }

  private open(operatorId: string, sealed: string): string {
    return this.deps.keyRing.openText('totp-secrets', sealed, operatorId);
  }

  /** Whether the policy makes this operator set up a second factor before anything else. */
  setupRequired(op: Pick<Operator, 'mfaEnabledAt'>): boolean {
    return this.deps.config.operators.staffMfa === 'required' && !op.mfaEnabledAt;
  }

  /** POST /auth/operator/mfa/setup. */
  async setup(operatorId: string): Promise<{ secret: string; otpauthUri: string }> {
    const op = await this.deps.operators.find(operatorId);
    if (!op) throw new AppError('unauthorized', 'The operator no longer exists');
    if (op.mfaEnabledAt) throw new AppError('conflict', "A second factor is enabled already; an administrator's reset-mfa clears it");
    const secret = newTotpSecret();
    if (!(await this.deps.mfa.setPending(operatorId, this.seal(operatorId, secret)))) {
      throw new AppError('conflict', "A second factor is enabled already; an administrator's reset-mfa clears it");
    }
    return { secret, otpauthUri: totpUri(secret, op.identifier) };
  }

  /** POST /auth/operator/mfa/confirm: the first right code enables the factor. */
  async confirm(operatorId: string, code: string): Promise<{ status: 'mfa_enabled'; recoveryCodes: string[] }> {
    const { unitOfWork, auditEvents, operators, mfa } = this.deps;
    const op = await operators.find(operatorId);
    if (!op) throw new AppError('unauthorized', 'The operator no longer exists');
    if (op.mfaEnabledAt) throw new AppError('conflict', 'A second factor is enabled already');
    if (!op.mfaPendingSecret) throw new AppError('conflict', 'No second factor is being set up: call POST /auth/operator/mfa/setup first');
    const step = matchingStep(this.open(operatorId, op.mfaPendingSecret), code);
    if (step === null) throw new AppError('otp_invalid', 'The code is not right: enter the current 6-digit code of your authenticator app');
    const recoveryCodes = Array.from({ length: RECOVERY_CODE_COUNT }, newRecoveryCode);
    const enabled = await unitOfWork.run(async (trx) => {
      const ok = await mfa.enable(operatorId, op.mfaPendingSecret!, step, recoveryCodes.map(hashRecoveryCode), trx);
      if (ok) {
        await auditEvents.record(
          { type: 'operator.mfa_enabled', actorType: 'operator', actorId: operatorId, subjectType: 'operator', subjectId: operatorId },
          trx,
        );
      }
      return ok;
    });
    if (!enabled) throw new AppError('conflict', 'The setup changed meanwhile: set up again');
    this.deps.metrics?.outcome('operator_mfa', 'enabled');
    return { status: 'mfa_enabled', recoveryCodes };
  }

  /**
   * The second factor at sign-in: a TOTP code of a step not accepted before, or an unused recovery
   * code. Null when neither (the caller counts it as a failed sign-in).
   */
  async check(op: Pick<Operator, 'id' | 'mfaSecret'>, otp: string): Promise<SecondFactorUsed | null> {
    if (!op.mfaSecret) return null;
    const code = otp.trim();
    if (/^[0-9]{6}$/.test(code)) {
      const step = matchingStep(this.open(op.id, op.mfaSecret), code);
      return step !== null && (await this.deps.mfa.acceptStep(op.id, step)) ? 'totp' : null;
    }
    if (looksLikeRecoveryCode(code) && (await this.deps.mfa.useRecoveryCode(op.id, hashRecoveryCode(code)))) {
      const left = await this.deps.mfa.unusedRecoveryCodes(op.id);
      await this.deps.auditEvents.record({
        type: 'operator.recovery_code_used',
        severity: 'high',
        actorType: 'operator',
        actorId: op.id,
        subjectType: 'operator',
        subjectId: op.id,
        data: { recoveryCodesLeft: left },
      });
      return 'recovery_code';
    }
    return null;
  }

  /**
   * POST /operators/{id}/reset-mfa (administrator): clears the factor, unlocks the account (its failure
   * count cleared: a lost device is what a locked administrator usually needs) and ends its sessions.
   */
  async reset(operatorId: string, actor: { operatorId: string }): Promise<Operator> {
    const { unitOfWork, auditEvents, operators, mfa, sessionRows } = this.deps;
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(operatorId)) throw new AppError('not_found', 'Operator not found');
    return unitOfWork.run(async (trx) => {
      const op = await operators.findForUpdate(operatorId, trx);
      if (!op) throw new AppError('not_found', 'Operator not found');
      await mfa.reset(operatorId, trx);
      await operators.unlock(operatorId, trx);
      const revoked = await sessionRows.revokeAllOf({ type: 'operator', id: operatorId }, 'mfa_reset', {}, trx);
      await auditEvents.record(
        {
          type: 'operator.mfa_reset',
          severity: 'high',
          actorType: 'operator',
          actorId: actor.operatorId,
          subjectType: 'operator',
          subjectId: operatorId,
          data: { wasEnabled: Boolean(op.mfaEnabledAt), wasLocked: op.isLockedNow(), sessionsRevoked: revoked },
        },
        trx,
      );
      return (await operators.find(operatorId, trx))!;
    });
  }
}
