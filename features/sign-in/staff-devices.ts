/**
 * Staff devices: the opaque token a successful staff sign-in answers (`deviceToken`), stored only as a
 * keyed hash (HMAC-SHA256 under the key ring's `staff-device-tokens` purpose), valid
 * STAFF_DEVICE_TTL_DAYS. A sign-in that presents a usable token of the account is judged by the
 * device's own failure count: OPERATOR_MAX_FAILED_LOGINS failures in a row lock the device (it is then
 * no longer recognised), not the account. The count and the lock move in one conditional UPDATE.
 */
import { randomBytes, createHmac } from 'node:crypto';
import { Repository } from '../../platform/database/unit-of-work.js';
import type { KeyRing } from '../../platform/keys/key-ring.js';

export interface StaffDevice {
  id: string;
  operatorId: string;
  failedCount: number;
}

const TABLE = 'operator_devices';
const HASH_SALT = Buffer.from('staff device token', 'utf8');

export class StaffDevicesRepository extends Repository {
  /** A new device token for the operator: the token (shown once) and its row. */
  async issue(operatorId: string, tokenHash: string, ttlDays: number): Promise<void> {
    await this.db(TABLE).insert({ operatorId, tokenHash, expiresAt: this.db.raw(`now() + make_interval(days => ?::int)`, [ttlDays]) });
  }

  /** The operator's device of this hash, when it is neither expired nor locked. */
  async usable(operatorId: string, tokenHash: string): Promise<StaffDevice | undefined> {
    const row = await this.db(TABLE)
      .where({ operatorId, tokenHash })
      .whereNull('lockedAt')
      .whereRaw('expires_at > now()')
      .first('id', 'operatorId', 'failedCount');
    return row as StaffDevice | undefined;
  }

  /** Counts one failure of the device; returns whether this failure locked it. */
  async countFailure(id: string, lockAfter: number): Promise<{ locked: boolean; failedCount: number } | undefined> {
    const n = 'failed_count + 1';
    const [row] = await this.db(TABLE)
      .where({ id })
      .whereNull('lockedAt')
      .update({ failedCount: this.db.raw(n), lockedAt: this.db.raw(`CASE WHEN ${n} >= ?::int THEN now() ELSE NULL END`, [lockAfter]) })
      .returning(['failedCount', 'lockedAt']);
    return row ? { locked: row.lockedAt !== null, failedCount: Number(row.failedCount) } : undefined;
  }

  /** A successful sign-in on the device: its count cleared. */
  async used(id: string): Promise<void> {
    await this.db(TABLE).where({ id }).update({ failedCount: 0, lastUsedAt: this.db.fn.now() });
  }

  /** Expired devices go (called on issue, so the table holds live devices only). */
  async purgeExpired(operatorId: string): Promise<void> {
    await this.db(TABLE).where({ operatorId }).whereRaw('expires_at <= now()').delete();
  }
}

/** Makes and hashes device tokens (256 random bits, base64url). */
export class StaffDeviceTokens {
  private readonly key: Buffer;
  constructor(keyRing: KeyRing) {
    // The active ring key: a ring rotation makes every device unknown once (its next sign-in counts
    // toward the account as a new device's would, and answers a new token).
    this.key = keyRing.saltedKey('staff-device-tokens', HASH_SALT);
  }
  newToken(): string {
    return randomBytes(32).toString('base64url');
  }
  hash(token: string): string {
    return createHmac('sha256', this.key).update(token).digest('hex');
  }
}
