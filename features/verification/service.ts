/**
 * Verification: 1:N /identify by operators (with escalation) and 1:1 /verify/self by consumers.
 * Every call that reaches here writes exactly one SearchLog row, whatever its outcome — including
 * an undecodable image or an engine timeout (the row then records the error code as its outcome).
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { Candidate, LatencyMs } from '../../models/index.js';
import type { AuditEventsRepository } from '../../platform/events/audit.js';
import type { UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { EmbeddingsRepository, StoredEmbedding } from '../face/index.js';
import type { NewSearchLog, SearchLogsRepository } from './search-logs-repository.js';
import type { UsersRepository } from '../users/index.js';
import type { Metrics } from '../../platform/metrics.js';
import type { ConsumerPrincipal, OperatorPrincipal } from '../../platform/http/principal.js';
import { decideCanonicalRefresh, type CanonicalRefreshDecision } from '../face/index.js';
import { qualitySummary, type QualitySummary } from '../../platform/face/quality.js';
import type { FaceService } from '../face/index.js';
import type { ProofTokens } from './proof-tokens.js';
import type { BiometricAttemptsService, SelfVerification } from '../face/index.js';
import type { FrontalFrame, LivenessService } from '../liveness/index.js';

export interface VerificationDeps {
  config: Config;
  unitOfWork: UnitOfWork;
  auditEvents: AuditEventsRepository;
  users: UsersRepository;
  searchLogs: SearchLogsRepository;
  embeddings: EmbeddingsRepository;
  proofTokens: ProofTokens;
  face: FaceService;
  biometric: BiometricAttemptsService;
  liveness: LivenessService;
  metrics: Metrics;
  logger: Logger;
}

export interface IdentifyAnswer {
  referenceId: string;
  outcome: 'match' | 'no_match' | 'liveness_failed' | 'no_face';
  candidates: Candidate[];
  /** Advisory capture quality of the probe; on no_face, that of the whole photo (too dark, too bright, too blurred). */
  quality: QualitySummary | null;
  /** The 1:N threshold the candidates were cut at. */
  threshold: { setting: 'IDENTIFY_MATCH_THRESHOLD'; value: number };
  latencyMs: LatencyMs;
}

export interface SelfAnswer {
  referenceId: string;
  outcome: 'match' | 'no_match' | 'liveness_failed' | 'no_face';
  /** On a match only: a failed comparison answers no score (it would guide someone trying faces). */
  score?: number;
  /** With `liveness_failed`: the liveness session given could not be used (failed, expired, used or not yours). */
  reason?: 'liveness_session_invalid';
  proofToken?: string;
  expiresIn?: number;
  /** Advisory capture quality; on no_face, that of the whole photo (too dark, too bright, too blurred). */
  quality: QualitySummary | null;
  /** On a match: whether this capture replaced the canonical embedding, and why (features/face/canonical-refresh.ts). */
  canonicalRefresh?: CanonicalRefreshDecision;
  latencyMs: LatencyMs;
}

type LogRow = NewSearchLog;

const elapsed = (t0: number) => Math.round(performance.now() - t0);

/** Candidates whose account is still live (a deleted user is never returned, whatever the index says). */
async function liveOnly(users: UsersRepository, candidates: Candidate[]): Promise<Candidate[]> {
  if (candidates.length === 0) return candidates;
  const live = await users.liveIds(candidates.map((c) => c.userId));
  return candidates.filter((c) => live.has(c.userId)).map((c, i) => ({ ...c, rank: i + 1 }));
}

export class VerificationService {
  constructor(private readonly deps: VerificationDeps) {}

  /** POST /identify: the attestation was checked by the route before anything else. */
  async identify(operator: OperatorPrincipal, probe: Buffer): Promise<IdentifyAnswer> {
    const { users, searchLogs, face, metrics } = this.deps;
    const t0 = performance.now();
    try {
      const r = await face.identify(probe);
      const candidates = await liveOnly(users, r.candidates);
      const outcome = r.outcome === 'match' && candidates.length === 0 ? 'no_match' : r.outcome;
      const referenceId = await searchLogs.insert({
        kind: 'identify',
        operatorId: operator.operatorId,
        orgId: operator.orgId,
        outcome,
        candidates,
        topScore: r.topScore,
        latencyMs: r.latencyMs,
        engineVersion: r.engineVersion,
        // The stored score is the face's: a photo without one has none (its advice is in the answer only).
        qualityScore: outcome === 'no_face' ? null : (r.quality?.score ?? null),
      });
      metrics.outcome('identify', outcome);
      return {
        referenceId,
        outcome,
        candidates,
        quality: qualitySummary(r.quality),
        threshold: { setting: 'IDENTIFY_MATCH_THRESHOLD', value: r.threshold },
        latencyMs: r.latencyMs,
      };
    } catch (e) {
      await this.logFailure(e, t0, { kind: 'identify', operatorId: operator.operatorId, orgId: operator.orgId });
      throw e;
    }
  }

  /** Records a call that ended in an error (bad image, engine timeout) and counts it; never masks the error. */
  private async logFailure(e: unknown, t0: number, who: Pick<LogRow, 'kind' | 'operatorId' | 'orgId' | 'userId'>): Promise<void> {
    const code = e instanceof AppError ? e.code : 'internal_error';
    this.deps.metrics.outcome(who.kind, code);
    try {
      await this.deps.searchLogs.insert({
        ...who,
        outcome: code,
        errorCode: code,
        candidates: [],
        topScore: null,
        latencyMs: { liveness: null, embed: null, search: null, total: elapsed(t0) },
      });
    } catch (logErr) {
      // The database itself may be what failed; the original error is what the caller gets.
      this.deps.logger.error({ err: (logErr as Error).message, code }, 'could not write the SearchLog row of a failed call');
    }
  }

  /** POST /identify/{referenceId}/escalate: idempotent — a second call keeps the first time. */
  async escalate(operator: OperatorPrincipal, referenceId: string): Promise<{ referenceId: string; escalatedAt: Date }> {
    const { searchLogs } = this.deps;
    return this.deps.unitOfWork.run(async (trx) => {
      const row = await searchLogs.findIdentifyForUpdate(referenceId, trx);
      // Another organisation's searches are not visible to this operator: not found, not forbidden.
      if (!row || (operator.role !== 'administrator' && row.orgId !== operator.orgId)) {
        throw new AppError('not_found', 'No identification with this referenceId');
      }
      if (row.escalatedAt) return { referenceId, escalatedAt: row.escalatedAt };
      const escalatedAt = await searchLogs.markEscalated(referenceId, operator.operatorId, trx);
      await this.deps.auditEvents.record(
        {
          type: 'identify.escalated',
          actorType: 'operator',
          actorId: operator.operatorId,
          subjectType: 'search_log',
          subjectId: referenceId,
          data: { escalatedAt: new Date(escalatedAt).toISOString() },
          public: { referenceId, operatorId: operator.operatorId, escalatedAt: new Date(escalatedAt).toISOString() },
        },
        trx,
      );
      return { referenceId, escalatedAt };
    });
  }

  /**
   * POST /verify/self: one comparison with the caller's own canonical embedding. Checked in this order
   * before the upload is decoded (the route already checked the token and the deleted user): enrolment
   * (409), the biometric lock (429 `biometric_locked`, no SearchLog row), one face request of the user
   * at a time (429 `rate_limited`).
   */
  async verifySelf(consumer: ConsumerPrincipal, capture: { image: Buffer } | { livenessSessionId: string }): Promise<SelfAnswer> {
    const { searchLogs, embeddings, metrics, biometric } = this.deps;
    const t0 = performance.now();
    // The enrolment and the template in one read: the comparison below uses this row (no second read).
    const tRead = performance.now();
    const enrolled = await embeddings.enrolmentWithTemplate(consumer.userId);
    const readMs = Math.round((performance.now() - tRead) * 1000) / 1000;
    if (!enrolled) {
      // Nothing to compare with: the consumer has not linked a NIN or BVN yet. Logged like any call.
      await searchLogs.insert({
        kind: 'verify_self',
        userId: consumer.userId,
        outcome: 'not_enrolled',
        errorCode: 'conflict',
        candidates: [],
        topScore: null,
        latencyMs: { liveness: null, embed: null, search: null, total: elapsed(t0) },
      });
      metrics.outcome('verify_self', 'not_enrolled');
      throw new AppError('conflict', 'No enrolled face to verify against: link a NIN or BVN first');
    }
    // The lock is checked by the reservation (one Redis script: locked, else another request of the
    // user in flight, else claimed), after the enrolment as the route promises: no read of its own.
    return biometric.oneAtATime(consumer.userId, 'verify_self', () => this.compareSelf(consumer, capture, { ...enrolled, readMs }, t0));
  }

  /**
   * A passed liveness session's best frontal frame against the user's canonical embedding (the
   * session was judged live already: no liveness stage here). null: the session cannot be used.
   */
  private async compareSession(
    userId: string,
    frontal: FrontalFrame | null,
    t0: number,
    stored: { row: StoredEmbedding | undefined; ms: number },
  ): Promise<SelfVerification | null> {
    if (!frontal) return null;
    const c = await this.deps.face.compareWithUser(frontal.embedding, userId, stored);
    return {
      outcome: c.score !== null && c.score >= this.deps.config.face.matchThreshold ? 'match' : 'no_match',
      score: c.score,
      ...(c.reason ? { reason: c.reason } : {}),
      livenessScore: null,
      embedding: { embedding: frontal.embedding, engineVersion: frontal.engineVersion, ms: 0 },
      quality: frontal.quality,
      latencyMs: { liveness: null, embed: null, search: c.ms, total: elapsed(t0) },
    };
  }

  private async compareSelf(
    consumer: ConsumerPrincipal,
    capture: { image: Buffer } | { livenessSessionId: string },
    enrolled: { qualityScore?: number | null; stored: StoredEmbedding; readMs: number },
    t0: number,
  ): Promise<SelfAnswer> {
    const { searchLogs, face, metrics, config, biometric } = this.deps;
    let r;
    try {
      if ('livenessSessionId' in capture) {
        r = await this.compareSession(consumer.userId, await this.deps.liveness.useByConsumer(consumer.userId, capture.livenessSessionId), t0, {
          row: enrolled.stored,
          ms: enrolled.readMs,
        });
      } else {
        await face.admitCapture(false); // no worker alive: 503 at once, before the upload is decoded (compared here: no search job)
        // The selfie is never stored: a small JPEG goes to its job as it came (FaceService.jobImage).
        const image = await face.jobImage(capture.image, { maxPixels: config.biometrics.selfieMaxPixels });
        r = await face.verifyAgainstUser(image, consumer.userId, 'largest', { admitted: true, stored: { row: enrolled.stored, ms: enrolled.readMs } });
      }
    } catch (e) {
      await this.logFailure(e, t0, { kind: 'verify_self', userId: consumer.userId });
      throw e;
    }
    if (r === null) {
      // A session that cannot be used: logged like any call, not counted as an attempt (a failed
      // session was counted when its frames were judged; a used or foreign one compared no face).
      const latencyMs = { liveness: null, embed: null, search: null, total: elapsed(t0) };
      const referenceId = await searchLogs.insert({
        kind: 'verify_self',
        userId: consumer.userId,
        outcome: 'liveness_failed',
        candidates: [],
        topScore: null,
        latencyMs,
      });
      metrics.outcome('verify_self', 'liveness_session_invalid');
      return { referenceId, outcome: 'liveness_failed', reason: 'liveness_session_invalid', quality: null, latencyMs };
    }
    // `total` from this call's start: the upload was normalised beside the enrolment read, before the face service's clock.
    r = { ...r, latencyMs: { ...r.latencyMs, total: elapsed(t0) } };
    // /verify/self has four outcomes; several faces cannot occur with the largest face chosen.
    const outcome = r.outcome === 'multiple_faces' ? 'no_face' : r.outcome;
    const embedding = r.embedding;
    const referenceId = randomUUID();
    const quality = r.quality ?? null;
    // A high-confidence match refreshes the searchable record with the most recent proven appearance,
    // unless the capture is poorer than the one stored (features/face/canonical-refresh.ts).
    const decision =
      outcome === 'match' && r.score !== null && embedding
        ? decideCanonicalRefresh({
            score: r.score,
            highConfidenceThreshold: config.face.highConfidenceThreshold,
            newQuality: quality?.score ?? null,
            storedQuality: enrolled.qualityScore ?? null,
            floor: config.face.canonicalRefreshMinQuality,
          })
        : undefined;
    // The log row, the canonical refresh (with its audit row), the proof token and the comparison's
    // count towards the lock (or its reset) do not depend on each other: one wait instead of four, all
    // before the answer. Any failure still fails the call; the comparison is counted even then.
    const [, , proof] = await Promise.all([
      searchLogs.insert({
        id: referenceId,
        kind: 'verify_self',
        userId: consumer.userId,
        outcome,
        candidates: outcome === 'match' && r.score !== null ? [{ userId: consumer.userId, score: r.score, rank: 1 }] : [],
        topScore: r.score,
        latencyMs: r.latencyMs,
        engineVersion: embedding?.engineVersion ?? null,
        qualityScore: outcome === 'no_face' ? null : (quality?.score ?? null),
      }),
      decision && embedding && r.score !== null
        ? this.applyCanonicalRefresh(consumer.userId, referenceId, decision, {
            score: r.score,
            embedding,
            quality,
            storedQuality: enrolled.qualityScore ?? null,
          })
        : undefined,
      outcome === 'match' ? this.deps.proofTokens.issue(consumer.userId, consumer.sessionId) : undefined,
      biometric.record(consumer.userId, 'verify_self', outcome),
    ]);
    metrics.outcome('verify_self', outcome);
    const answer: SelfAnswer = { referenceId, outcome, quality: qualitySummary(r.quality), latencyMs: r.latencyMs };
    if (outcome === 'match' && r.score !== null) answer.score = r.score;
    if (decision) answer.canonicalRefresh = decision;
    return Object.assign(answer, proof);
  }

  /**
   * Applies a /verify/self refresh decision: the new canonical embedding when refreshed, and its audit
   * row, in ONE statement (refreshed and audited together, or neither): the audit INSERT rides in the
   * upsert's statement (`alongside`), so the whole write is one round trip on the critical path, where
   * a transaction of its own took five (BEGIN, the audit row, the lock, the upsert, COMMIT).
   */
  private async applyCanonicalRefresh(
    userId: string,
    referenceId: string,
    decision: CanonicalRefreshDecision,
    c: { score: number; embedding: { embedding: number[]; engineVersion: string }; quality: QualitySummary | null; storedQuality: number | null },
  ): Promise<void> {
    const { embeddings, config, auditEvents } = this.deps;
    const audited = decision.reason !== 'below_high_confidence';
    if (!decision.refreshed && !audited) return;
    const fields = {
      actorType: 'consumer',
      actorId: userId,
      subjectType: 'user',
      subjectId: userId,
      data: {
        referenceId,
        reason: decision.reason,
        score: c.score,
        qualityScore: c.quality?.score ?? null,
        qualityIssues: c.quality?.issues ?? null,
        storedQualityScore: c.storedQuality,
        floor: config.face.canonicalRefreshMinQuality,
      },
    } as const;
    if (!decision.refreshed) {
      await auditEvents.record({ type: 'canonical_embedding.refresh_declined', ...fields });
      return;
    }
    // A refresh is always audited (its reason is never below_high_confidence).
    await embeddings.upsert(
      userId,
      c.embedding.embedding,
      'verify_self',
      c.embedding.engineVersion,
      undefined,
      c.quality?.score ?? null,
      auditEvents.insertStatement({ type: 'canonical_embedding.refreshed', ...fields }),
    );
  }
}
