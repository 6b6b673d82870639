/**
 * The one retention sweep (docs/data-protection.md, "How long"): the `retention-sweep` job of the
 * `upstream` queue (a BullMQ job scheduler every RETENTION_SWEEP_INTERVAL_SECONDS) runs it.
 *
 * 1. Erasures first (they have a deadline): every erasure whose after-commit step (Redis) did not succeed
 *    at its DELETE gets it again, then every erasure whose copies are all gone gets its receipt.
 * 2. Then every registered family's age rule, in registration order. A family that fails is logged
 *    and the others still run (one missing privilege must not keep every other record forever); the
 *    run then fails as a whole so the job shows it.
 * A run that purged something writes one AuditEvent `retention.purged` with the counts and cut-offs.
 */
import { randomUUID } from 'node:crypto';
import { AuditEventsRepository } from '../events/audit.js';
import type { Db } from '../database/unit-of-work.js';
import type { Logger } from '../logger.js';
import type { ErasureLedger, RetentionRegistry } from './registry.js';

/** A DELETE runs its after-commit erasure itself right after its commit; the sweep takes over only after this. */
export const AFTER_COMMIT_GRACE_MS = 60_000;

export interface SweepResult {
  /** Records purged per family (a family that failed is absent). */
  purged: Record<string, number>;
  /** Erasures whose receipt this run wrote. */
  erasuresFinished: number;
  /** Families whose purge failed. */
  failed: string[];
}

export interface SweepDeps {
  db: Db;
  registry: RetentionRegistry;
  ledger: ErasureLedger;
  logger: Logger;
}

export class RetentionSweepError extends Error {
  constructor(readonly result: SweepResult) {
    super(`retention sweep: ${result.failed.join(', ')} not purged`);
  }
}

export async function runRetentionSweep(deps: SweepDeps, now = new Date()): Promise<SweepResult> {
  const { registry, ledger, logger } = deps;
  for (const userId of await ledger.awaitingAfterCommit(AFTER_COMMIT_GRACE_MS)) {
    try {
      await registry.eraseAfterCommit({ userId, phone: null });
      await ledger.markAfterCommitDone(userId);
    } catch (e) {
      logger.warn({ userId, err: (e as Error).message }, 'erasure: after-commit step failed again; the next sweep retries');
    }
  }
  const erasuresFinished = (await ledger.completeCovered()).length;

  const purged: Record<string, number> = {};
  const cutoffs: Record<string, string> = {};
  const failed: string[] = [];
  for (const family of registry.aged()) {
    const cutoff = new Date(now.getTime() - family.retention.days * 86_400_000);
    try {
      purged[family.name] = await family.retention.purge(cutoff);
      cutoffs[family.name] = cutoff.toISOString();
    } catch (e) {
      failed.push(family.name);
      logger.error({ family: family.name, store: family.store, err: (e as Error).message }, 'retention: family not purged');
    }
  }
  // A run that purged nothing leaves no row: the hourly no-op would otherwise fill the log it keeps short.
  if (Object.values(purged).some((n) => n > 0)) {
    await new AuditEventsRepository(deps.db).record({
      type: 'retention.purged',
      actorType: 'system',
      actorId: null,
      subjectType: 'retention_run',
      subjectId: randomUUID(),
      data: { counts: purged, cutoffs, ...(failed.length ? { failed } : {}) },
    });
  }
  const result = { purged, erasuresFinished, failed };
  if (failed.length) throw new RetentionSweepError(result);
  return result;
}
