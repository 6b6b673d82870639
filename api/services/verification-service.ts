/**
 * Verification: 1:N /identify by operators (with escalation) and 1:1 /verify/self by consumers.
 * Every call that reaches here writes exactly one SearchLog row, whatever its outcome — including
 * an undecodable image or an engine timeout (the row then records the error code as its outcome).
 */
import type { Knex } from 'knex';
import type { Config } from '../../shared/config.js';
import { AppError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { Candidate, LatencyMs } from '../../models/index.js';
import { recordAudit } from '../../shared/repositories/audit.js';
import type { EmbeddingsRepository } from '../../shared/repositories/embeddings.js';
import type { NewSearchLog, SearchLogsRepository } from '../../shared/repositories/search-logs.js';
import type { UsersRepository } from '../../shared/repositories/users.js';
import type { Metrics } from '../metrics.js';
import type { ConsumerAuth, OperatorAuth } from './authorization.js';
import type { FaceService } from './face-service.js';
import type { ProofTokens } from './proof-tokens.js';

export interface VerificationDeps {
  config: Config;
  db: Knex;
  users: UsersRepository;
  searchLogs: SearchLogsRepository;
  embeddings: EmbeddingsRepository;
  proofTokens: ProofTokens;
  face: FaceService;
  metrics: Metrics;
  logger: Logger;
}

export interface IdentifyAnswer {
  referenceId: string;
  outcome: 'match' | 'no_match' | 'liveness_failed' | 'no_face';
  candidates: Candidate[];
  latencyMs: LatencyMs;
}

export interface SelfAnswer {
  referenceId: string;
  outcome: 'match' | 'no_match' | 'liveness_failed' | 'no_face';
  score: number | null;
  proofToken?: string;
  expiresIn?: number;
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
  async identify(operator: OperatorAuth, probe: Buffer): Promise<IdentifyAnswer> {
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
      });
      metrics.outcome('identify', outcome);
      return { referenceId, outcome, candidates, latencyMs: r.latencyMs };
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
  async escalate(operator: OperatorAuth, referenceId: string): Promise<{ referenceId: string; escalatedAt: Date }> {
    const { db, searchLogs } = this.deps;
    return db.transaction(async (trx) => {
      const row = await searchLogs.findIdentifyForUpdate(referenceId, trx);
      // Another organisation's searches are not visible to this operator: not found, not forbidden.
      if (!row || (operator.role !== 'administrator' && row.orgId !== operator.orgId)) {
        throw new AppError('not_found', 'No identification with this referenceId');
      }
      if (row.escalatedAt) return { referenceId, escalatedAt: row.escalatedAt };
      const escalatedAt = await searchLogs.markEscalated(referenceId, operator.operatorId, trx);
      await recordAudit(trx, {
        type: 'search_escalated',
        actorType: 'operator',
        actorId: operator.operatorId,
        subjectType: 'search_log',
        subjectId: referenceId,
      });
      return { referenceId, escalatedAt };
    });
  }

  /** POST /verify/self: one comparison with the caller's own canonical embedding. */
  async verifySelf(consumer: ConsumerAuth, image: Buffer): Promise<SelfAnswer> {
    const { searchLogs, embeddings, face, metrics, config } = this.deps;
    const t0 = performance.now();
    if (!(await embeddings.exists(consumer.userId))) {
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
    let r;
    try {
      r = await face.verifyAgainstUser(image, consumer.userId, 'largest');
    } catch (e) {
      await this.logFailure(e, t0, { kind: 'verify_self', userId: consumer.userId });
      throw e;
    }
    // /verify/self has four outcomes; several faces cannot occur with the largest face chosen.
    const outcome = r.outcome === 'multiple_faces' ? 'no_face' : r.outcome;
    const embedding = r.embedding;
    // The log row, the canonical refresh and the proof token do not depend on each other: one round
    // trip of waiting instead of three (issue 12). Any failure still fails the call.
    const [referenceId, proof] = await Promise.all([
      searchLogs.insert({
        kind: 'verify_self',
        userId: consumer.userId,
        outcome,
        candidates: outcome === 'match' && r.score !== null ? [{ userId: consumer.userId, score: r.score, rank: 1 }] : [],
        topScore: r.score,
        latencyMs: r.latencyMs,
        engineVersion: embedding?.engineVersion ?? null,
      }),
      outcome === 'match'
        ? (async () => {
            // A high-confidence match refreshes the searchable record with the most recent proven appearance.
            if (r.score !== null && r.score >= config.highConfidenceThreshold && embedding) {
              await embeddings.upsert(consumer.userId, embedding.embedding, 'verify_self', embedding.engineVersion);
            }
            return this.deps.proofTokens.issue(consumer.userId);
          })()
        : undefined,
    ]);
    metrics.outcome('verify_self', outcome);
    return { referenceId, outcome, score: r.score, latencyMs: r.latencyMs, ...proof };
  }
}
