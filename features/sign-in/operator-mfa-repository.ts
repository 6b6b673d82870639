/**
 * Staff second factors: the operator's TOTP secret (sealed; the columns on `operators`), the last
 * accepted TOTP step, and the single-use recovery codes (`operator_recovery_codes`, SHA-256 only).
 * Every "use once" is a conditional UPDATE: of concurrent uses of one code exactly one succeeds.
 */
import { Operator } from '../../models/index.js';
import { Repository, type Db } from '../../platform/database/unit-of-work.js';

const RECOVERY = 'operator_recovery_codes';

export class OperatorMfaRepository extends Repository {
  /** Setup: the new secret waits for its confirmation (an enabled factor is never replaced here). */
  async setPending(operatorId: string, sealedSecret: string): Promise<boolean> {
    const n = await this.db(Operator.tableName).where({ id: operatorId }).whereNull('mfaEnabledAt').update({ mfaPendingSecret: sealedSecret });
    return Number(n) > 0;
  }

  /**
   * Confirmation: the pending secret becomes the factor, its first code's step is used, and the
   * recovery codes replace any earlier ones. False when there was no pending secret any more.
   */
  async enable(operatorId: string, sealedSecret: string, step: number, codeHashes: string[], trx: Db): Promise<boolean> {
    const n = await trx(Operator.tableName)
      .where({ id: operatorId, mfaPendingSecret: sealedSecret })
      .whereNull('mfaEnabledAt')
      .update({ mfaSecret: sealedSecret, mfaPendingSecret: null, mfaEnabledAt: trx.fn.now(), mfaLastStep: step });
    if (Number(n) === 0) return false;
    await trx(RECOVERY).where({ operatorId }).delete();
    await trx(RECOVERY).insert(codeHashes.map((codeHash) => ({ operatorId, codeHash })));
    return true;
  }

  /** Accepts a TOTP step once: only a step after the last accepted one moves it (no replay). */
  async acceptStep(operatorId: string, step: number): Promise<boolean> {
    const n = await this.db(Operator.tableName)
      .where({ id: operatorId })
      .whereNotNull('mfaEnabledAt')
      .where((w) => w.whereNull('mfaLastStep').orWhere('mfaLastStep', '<', step))
      .update({ mfaLastStep: step });
    return Number(n) > 0;
  }

  /** Uses a recovery code once; false when unknown or used already. */
  async useRecoveryCode(operatorId: string, codeHash: string): Promise<boolean> {
    const n = await this.db(RECOVERY).where({ operatorId, codeHash }).whereNull('usedAt').update({ usedAt: this.db.fn.now() });
    return Number(n) > 0;
  }

  async unusedRecoveryCodes(operatorId: string): Promise<number> {
    const [{ n }] = await this.db(RECOVERY).where({ operatorId }).whereNull('usedAt').count({ n: '*' });
    return Number(n);
  }

  /** An administrator's reset: no factor, no pending secret, no recovery codes. */
  async reset(operatorId: string, trx: Db): Promise<void> {
    await trx(Operator.tableName)
      .where({ id: operatorId })
      .update({ mfaSecret: null, mfaPendingSecret: null, mfaEnabledAt: null, mfaLastStep: null, updatedAt: trx.fn.now() });
    await trx(RECOVERY).where({ operatorId }).delete();
  }
}
