/**
 * Biometric attempt limits (SPEC 12.1, NIST SP 800-63B 5.2.3): consecutive failed comparisons of one
 * user, on `/verify/self` and verify-face alike, lock that user's biometric routes for a time that
 * doubles with each further failure; a match resets the count. Someone holding a stolen consumer
 * session cannot try printed or replayed faces without limit.
 *
 * Also the per-user in-flight limit of `/verify/self` and verify-face: one face request of a user at a
 * time, claimed in one step with the lock check, so that one account cannot occupy the face queue (and
 * the web process's decoder) with parallel uploads, nor run parallel comparisons past its lock.
 *
 * Both are checked before an upload is decoded. The counters are BiometricAttemptsStore (Redis, Lua).
 */
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { AuditEventsRepository } from '../../platform/events/audit.js';
import type { BiometricAttemptsStore } from './biometric-attempts-store.js';
import type { Metrics } from '../../platform/metrics.js';

/**
 * The in-flight claim's lease: three renewals a second apart fit in it, so a web process whose event
 * loop stalls for up to 2 s keeps its claim, and a killed one frees its users within 3 s.
 */
export const IN_FLIGHT_LEASE_MS = 3000;

/**
 * The routes whose failures count, as named in metrics and the audit row. `liveness_session`: a
 * consumer's failed liveness session (SPEC 13.1) is one failed attempt; a passed one resets nothing
 * (only a match does).
 */
export type BiometricRoute = 'verify_self' | 'verify_face' | 'liveness_session';

/** Outcomes that are a failed comparison (the others — no face, several faces — compare nothing). */
const FAILURES: ReadonlySet<string> = new Set(['no_match', 'liveness_failed', 'face_mismatch']);

export interface BiometricAttemptsDeps {
  auditEvents: AuditEventsRepository;
  store: BiometricAttemptsStore;
  metrics: Metrics;
  logger: Logger;
  /**
   * The lease of an in-flight claim: renewed every third of it while the request runs, so that the
   * claim of a request whose web process was killed frees within the lease, not after a whole face-job
   * budget (the user's next /verify/self would be refused 429 all that time).
   */
  inFlightLeaseMs: number;
}

export class BiometricAttemptsService {
  constructor(private readonly deps: BiometricAttemptsDeps) {}

  /** Counts a comparison's outcome: a failure towards the lock (auditing a lock it sets), a match resets. */
  async record(userId: string, route: BiometricRoute, outcome: string): Promise<void> {
    const { store, auditEvents, logger } = this.deps;
    if (outcome === 'match') {
      await store.reset(userId);
      return;
    }
    if (!FAILURES.has(outcome)) return;
    const r = await store.recordFailure(userId);
    if (r.lockSeconds > 0) {
      await auditEvents.record({
        type: 'biometric.locked',
        severity: 'high',
        actorType: 'consumer',
        actorId: userId,
        subjectType: 'user',
        subjectId: userId,
        data: { route, outcome, consecutiveFailures: r.failures, lockSeconds: r.lockSeconds },
      });
      logger.warn(
        { event: 'biometric.locked', severity: 'high', userId, route, consecutiveFailures: r.failures, lockSeconds: r.lockSeconds },
        'biometric routes locked after consecutive failures',
      );
    }
  }

  /**
   * Runs `work` as the user's one in-flight face request, reserved atomically with the lock check: 429
   * `biometric_locked` while the user is locked, 429 `rate_limited` while another request of the user
   * runs (both with Retry-After). A request that started just before another one's
   * failure locked the user is refused here, so parallel requests cannot compare past the lock.
   */
  async oneAtATime<T>(userId: string, route: BiometricRoute, work: () => Promise<T>): Promise<T> {
    const { store, metrics } = this.deps;
    const leaseMs = this.deps.inFlightLeaseMs;
    const { owner, lockLeftMs } = await store.reserve(userId, leaseMs);
    if (lockLeftMs > 0) {
      metrics.outcome(route, 'biometric_locked');
      throw new AppError('biometric_locked', 'Too many failed face checks in a row; try again later', {
        retryAfter: Math.max(1, Math.ceil(lockLeftMs / 1000)),
      });
    }
    if (!owner) {
      metrics.outcome(route, 'rate_limited');
      // The other request answers within seconds (its lease's expiry is only the bound if its process died).
      throw new AppError('rate_limited', 'Another face check of yours is in progress; wait for its answer', { retryAfter: 1 });
    }
    // A failed renewal (Redis away) lets the lease run out: at worst a second request of the user runs
    // alongside, its comparisons counted all the same.
    const renew = setInterval(() => void store.renewInFlight(userId, owner, leaseMs).catch(() => {}), Math.max(50, Math.floor(leaseMs / 3)));
    renew.unref();
    try {
      return await work();
    } finally {
      clearInterval(renew);
      await store.releaseInFlight(userId, owner).catch(() => {});
    }
  }
}
