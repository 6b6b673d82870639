/**
 * One run of the retention job: records past their RETENTION_DAYS_* are purged (counts audited as
 * `retention.purged`), and erasures whose Redis purge failed at DELETE time are finished (their keys
 * purged, then the receipt `user.erased` once no search snapshot holds them).
 */
import type { Knex } from 'knex';
import type { Config } from '../../../platform/config.js';
import { BiometricKeyRing } from '../../../platform/keys/key-ring.js';
import type { UpstreamResult } from '../../../platform/jobs/upstream.js';
import { keySpace, type Redis } from '../../../platform/redis/redis.js';
import { ErasuresRepository } from '../erasures-repository.js';
import { RetentionRepository } from '../../../platform/retention/retention.js';
import { BiometricAttemptsStore } from '../../face/index.js';
import { IdentityTokenStore } from '../../identity/index.js';

/** A DELETE purges Redis itself right after its commit; the sweep takes over only after this. */
const REDIS_PURGE_GRACE_MS = 60_000;

export async function runRetentionSweep(db: Knex, redis: Redis, config: Config): Promise<UpstreamResult> {
  const purged = await new RetentionRepository(db).purge({
    searchLogs: config.protection.retentionDaysSearchLogs,
    disputes: config.protection.retentionDaysDisputes,
    auditEvents: config.protection.retentionDaysAuditEvents,
  });
  const erasures = new ErasuresRepository(db);
  const keys = keySpace(config.redis.prefix);
  const store = new IdentityTokenStore(redis, keys, BiometricKeyRing.from(config.security));
  const attempts = new BiometricAttemptsStore(redis, keys, config.biometrics);
  const late = await erasures.awaitingRedisPurge(REDIS_PURGE_GRACE_MS);
  for (const userId of late) {
    // The phone's sign-in code is not found here (the phone is erased): it expires within OTP_TTL_SECONDS.
    await store.purgeUser(userId);
    await attempts.purgeUser(userId);
    await erasures.markRedisPurged(userId);
  }
  const finished = await erasures.completeCovered();
  return { applied: true, purged, erasuresFinished: finished.length };
}
