/**
 * Identity linking (SPEC sections 2, 3, 4 and 7): validate a NIN or BVN against the registry, prove
 * with a live capture that the face matches the registry photo, then link.
 *
 * The workflow only: its Redis state is IdentityTokenStore (features/identity/identity-tokens.ts), its
 * link rows the users repository. It reaches the registry only through RegistryClient (HTTP), does face work only
 * through FaceService (the workers), and writes the canonical embedding only through the embeddings
 * repository.
 */
import type { Config } from '../../platform/config.js';
import { decodeEmbedding, encodeEmbedding } from '../../platform/face/embeddings.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import { maskTail, type AuditEventsRepository } from '../../platform/events/audit.js';
import type { UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { EmbeddingsRepository } from '../face/index.js';
import { isUniqueViolation } from '../../platform/database/unit-of-work.js';
import type { UsersRepository } from '../users/index.js';
import { qualitySummary, type QualitySummary } from '../../platform/face/quality.js';
import type { Metrics } from '../../platform/metrics.js';
import type { FaceService } from '../face/index.js';
import type { IdentityTokenStore, LinkClaims, ValidationMeta } from './identity-tokens.js';
import type { Registry, RegistryClient } from './registry-client.js';
import type { KeyRing } from '../../platform/keys/key-ring.js';
import type { DedupeService } from '../dedupe/index.js';
import { deviceHint, fullName, maskName, recordDisagreements, snapshot } from './registry-records.js';
import type { BiometricAttemptsService } from '../face/index.js';
import { livenessSessionInvalid, type LivenessService } from '../liveness/index.js';

export type { Registry } from './registry-client.js';

export interface IdentityDeps {
  config: Config;
  unitOfWork: UnitOfWork;
  auditEvents: AuditEventsRepository;
  users: UsersRepository;
  embeddings: EmbeddingsRepository;
  store: IdentityTokenStore;
  metrics: Metrics;
  logger: Logger;
  face: FaceService;
  registry: RegistryClient;
  biometric: BiometricAttemptsService;
  dedupe: DedupeService;
  keyRing: KeyRing;
  liveness: LivenessService;
}

/** Associated data of a consumer's sealed live capture (a blob of one user cannot pass for another's). */
const liveCaptureSubject = (userId: string) => `live-capture:${userId}`;

export type FaceOutcome = 'match' | 'liveness_failed' | 'face_mismatch' | 'cross_registry_mismatch' | 'no_face' | 'multiple_faces';

export const OTHER: Record<Registry, Registry> = { nin: 'bvn', bvn: 'nin' };
const LABEL: Record<Registry, string> = { nin: 'NIN', bvn: 'BVN' };

/** A face outcome as a 422; `quality` (advisory, of the live capture) tells the person what to change. */
function faceError(outcome: Exclude<FaceOutcome, 'match'>, details?: Record<string, unknown>, quality?: QualitySummary | null): AppError {
  const messages: Record<typeof outcome, string> = {
    liveness_failed: 'The capture did not pass the liveness check; take a new live selfie',
    face_mismatch: 'The face does not match the registry photo',
    cross_registry_mismatch: "The face does not match the account's other linked registry",
    no_face: 'No face was found in the capture',
    multiple_faces: 'More than one face was found in the capture; only you should be in the picture',
  };
  return new AppError(outcome, messages[outcome], { extra: { outcome, ...(quality ? { quality } : {}) }, ...(details ? { details } : {}) });
}

const unknownValidation = (registry: Registry) => new AppError('not_found', `Unknown or expired validationToken: validate the ${LABEL[registry]} again`);

export type ValidateResult =
  { validationToken: string; matchedName: string; expiresIn: number } | { alreadyLinked: true; linkedAt: string; deviceHint: string };

export interface VerifyFaceInput {
  userId: string;
  registry: Registry;
  validationToken: string;
  /** The live capture; absent when reuseCapture is true or a liveness session stands in for it. */
  file?: Buffer;
  reuseCapture: boolean;
  /** A passed liveness session of the user (SPEC 13.1): its best frontal frame is the capture. */
  livenessSessionId?: string;
}

export interface VerifyFaceMatch {
  outcome: 'match';
  linkToken: string;
  expiresIn: number;
  score: number;
  /** Advisory capture quality of the live capture (of the reused one with reuseCapture); null when unknown. */
  quality: QualitySummary | null;
}

export interface LinkResult {
  status: 'linked';
  registry: Registry;
  linkedAt: string;
}

export class IdentityService {
  constructor(private readonly deps: IdentityDeps) {}

  /** The user's sealed live capture (JPEG) from verify-face, when still kept; null otherwise. */
  private async liveCapture(userId: string): Promise<Buffer | null> {
    const sealed = await this.deps.store.liveCapture(userId);
    if (!sealed) return null;
    try {
      return this.deps.keyRing.open('captures', sealed, liveCaptureSubject(userId));
    } catch {
      return null;
    }
  }

  async validate(input: { userId: string; registry: Registry; number: string; fault?: string | null }): Promise<ValidateResult> {
    const { config, users, store, metrics } = this.deps;
    const { userId, registry, number } = input;

    // Each validation caches a registry photo and buys verify-face attempts: cap them per consumer.
    const { count, resetInSeconds } = await store.countValidation(userId);
    if (count > config.identity.validationsPerUserPerHour) {
      metrics.outcome(`validate_${registry}`, 'rate_limited');
      throw new AppError('rate_limited', `At most ${config.identity.validationsPerUserPerHour} validations per hour; try again later`, {
        retryAfter: resetInSeconds,
      });
    }

    // Linked to some account already? To another live account: only the date and a coarse device hint.
    const existing = await users.linkHolder(registry, number);
    if (existing && existing.userId === userId) {
      throw new AppError('conflict', `This ${LABEL[registry]} is already linked to your account`);
    }
    if (existing && !existing.deletedAt) {
      metrics.outcome(`validate_${registry}`, 'already_linked');
      return { alreadyLinked: true, linkedAt: new Date(existing.linkedAt).toISOString(), deviceHint: existing.deviceHint || 'unknown device' };
    }
    if (await users.hasLink(registry, userId)) throw new AppError('conflict', `Your account already has a ${LABEL[registry]} linked`);

    const record = await this.deps.registry.lookup(registry, number, { includePhoto: true, fault: input.fault });
    if (!record) {
      metrics.outcome(`validate_${registry}`, 'not_found');
      throw new AppError('not_found', `The registry has no record of this ${LABEL[registry]}`);
    }

    // The other registry, when linked, must describe the same person.
    const other = await users.linkedRecord(OTHER[registry], userId);
    if (other) {
      const fields = recordDisagreements(other, snapshot(record));
      if (fields.length) {
        metrics.outcome(`validate_${registry}`, 'registry_mismatch');
        this.deps.logger.warn({ userId, registry, fields }, 'registry_mismatch: record disagrees with the linked registry');
        // The answer names no field: which one differs would let a caller learn a stranger's record
        // (name, date of birth) one field at a time. The log keeps them for support.
        throw new AppError('registry_mismatch', `The ${LABEL[registry]} record does not match your linked ${LABEL[OTHER[registry]]}`);
      }
    }

    const validationToken = await store.saveValidation(
      { userId, registry, number, record: snapshot(record), photoMime: record.photoMime ?? 'application/octet-stream', issuedAt: new Date().toISOString() },
      record.photo!,
      config.identity.validationTokenTtlSeconds,
    );
    metrics.outcome(`validate_${registry}`, 'validated');
    return { validationToken, matchedName: maskName(fullName(record)), expiresIn: config.identity.validationTokenTtlSeconds };
  }

  async verifyFace(input: VerifyFaceInput): Promise<VerifyFaceMatch> {
    const { config, store, metrics } = this.deps;
    const { userId, registry, validationToken } = input;
    const meta = await store.validationMeta(validationToken);
    if (!meta || meta.userId !== userId || meta.registry !== registry) throw unknownValidation(registry);

    // Every attempt counts, whatever its outcome, before any face work.
    const { attempts, ttlMs } = await store.countAttempt(validationToken);
    if (attempts > config.identity.verifyFaceMaxAttempts) {
      metrics.outcome('verify_face', 'rate_limited');
      throw new AppError('rate_limited', `At most ${config.identity.verifyFaceMaxAttempts} verify-face attempts per validationToken; validate again later`, {
        retryAfter: Math.max(1, Math.ceil(ttlMs / 1000)),
      });
    }

    // The user's biometric lock (consecutive failures across validation tokens and /verify/self) and
    // one face request of the user at a time, reserved together before any image is decoded: parallel
    // requests (over several validation tokens) cannot run comparisons past the lock.
    return this.deps.biometric.oneAtATime(userId, 'verify_face', () => this.compareFace(input, meta));
  }

  private async compareFace(input: VerifyFaceInput, meta: ValidationMeta): Promise<VerifyFaceMatch> {
    const { config, store, face, metrics, logger } = this.deps;
    const { userId, registry, validationToken } = input;
    const photo = await store.validationPhoto(validationToken);
    if (!photo) throw unknownValidation(registry);

    let embedding: number[];
    let engineVersion: string;
    let score: number;
    let quality: QualitySummary | null;
    if (input.reuseCapture) {
      const capture = await store.capture(userId);
      if (!capture) {
        throw new AppError(
          'not_found',
          `No passing NIN capture of yours within the last ${config.identity.captureReuseSeconds} s to reuse; send a live capture (file)`,
        );
      }
      // Still compared against THIS registry's photo.
      const v = await face.verifyEmbeddingAgainstPhoto(capture.embedding, photo);
      if (v.engineVersion !== capture.engineVersion) {
        throw new AppError('not_found', 'The reusable capture was made by another face engine version; send a live capture (file)');
      }
      embedding = capture.embedding;
      engineVersion = capture.engineVersion;
      score = v.score;
      quality = capture.quality;
      if (v.outcome !== 'match') {
        await this.deps.biometric.record(userId, 'verify_face', 'face_mismatch');
        metrics.outcome('verify_face', 'face_mismatch');
        throw faceError('face_mismatch', undefined, quality);
      }
    } else if (input.livenessSessionId !== undefined) {
      // The session's best frontal frame, once: a failed, expired, used or foreign session is refused
      // here without counting an attempt (the failed session was counted when its frames were judged).
      const frontal = await this.deps.liveness.useByConsumer(userId, input.livenessSessionId);
      if (!frontal) {
        metrics.outcome('verify_face', 'liveness_session_invalid');
        throw livenessSessionInvalid();
      }
      const v = await face.verifyEmbeddingAgainstPhoto(frontal.embedding, photo);
      if (v.engineVersion !== frontal.engineVersion) throw livenessSessionInvalid();
      embedding = frontal.embedding;
      engineVersion = frontal.engineVersion;
      score = v.score;
      quality = frontal.quality;
      if (v.outcome !== 'match') {
        await this.deps.biometric.record(userId, 'verify_face', 'face_mismatch');
        metrics.outcome('verify_face', 'face_mismatch');
        throw faceError('face_mismatch', undefined, quality);
      }
      await store.saveLiveCapture(
        userId,
        this.deps.keyRing.seal('captures', frontal.jpeg, liveCaptureSubject(userId)),
        Math.max(config.identity.linkTokenTtlSeconds, config.identity.captureReuseSeconds),
      );
    } else {
      // A live capture is a selfie: SELFIE_MAX_PIXELS, checked from the header before decoding.
      await face.admitCapture(false); // no worker alive: 503 at once, before the upload is decoded
      const capture = await face.normalise(input.file!, { maxPixels: config.biometrics.selfieMaxPixels });
      const v = await face.verifyAgainstPhoto(capture, photo, { admitted: true });
      quality = qualitySummary(v.quality);
      if (v.outcome !== 'match') {
        await this.deps.biometric.record(userId, 'verify_face', v.outcome);
        metrics.outcome('verify_face', v.outcome);
        throw faceError(v.outcome, undefined, quality);
      }
      embedding = v.embedding!.embedding;
      engineVersion = v.embedding!.engineVersion;
      score = v.score!;
      // Kept (sealed) for as long as a link may use this capture: the evidence of a case the link opens.
      if (v.capture) {
        await store.saveLiveCapture(
          userId,
          this.deps.keyRing.seal('captures', v.capture.image.jpeg, liveCaptureSubject(userId)),
          Math.max(config.identity.linkTokenTtlSeconds, config.identity.captureReuseSeconds),
        );
      }
    }

    // Cross-registry: when the other registry is linked, the face must also match the canonical embedding.
    let crossRegistryFlagged = false;
    let crossRegistryScore: number | null = null;
    if (await this.deps.users.hasLink(OTHER[registry], userId)) {
      const c = await face.compareWithUser(embedding, userId);
      crossRegistryScore = c.score;
      if (c.score === null) {
        logger.info({ userId, registry, reason: c.reason }, 'cross-registry check skipped: no comparable canonical embedding');
      } else if (c.score < config.face.matchThreshold) {
        const policy = config.identity.crossRegistryMismatchPolicy;
        const action = policy === 'hard-block' ? 'blocked' : 'flagged';
        await this.deps.auditEvents.record({
          type: 'identity.cross_registry_mismatch',
          severity: 'high',
          actorType: 'consumer',
          actorId: userId,
          subjectType: 'user',
          subjectId: userId,
          data: {
            registry,
            otherRegistry: OTHER[registry],
            number: maskTail(meta.number, 3),
            policy,
            action,
            score: c.score,
            threshold: config.face.matchThreshold,
            captureReused: input.reuseCapture,
          },
        });
        logger.warn(
          { event: 'cross_registry_mismatch', severity: 'high', userId, registry, policy, action, score: c.score },
          "cross_registry_mismatch: the face does not match the account's other linked registry",
        );
        if (policy === 'hard-block') {
          metrics.outcome('verify_face', 'cross_registry_mismatch');
          throw faceError('cross_registry_mismatch', undefined, quality);
        }
        crossRegistryFlagged = true;
      }
    }

    // Pass: the validation (and its registry photo) is dropped; only one concurrent pass gets a linkToken.
    if (!(await store.dropValidation(validationToken))) throw unknownValidation(registry);

    if (registry === 'nin' && !input.reuseCapture) await store.saveCapture(userId, embedding, engineVersion, quality, config.identity.captureReuseSeconds);

    const claims: LinkClaims = {
      userId,
      registry,
      number: meta.number,
      record: meta.record,
      embedding: encodeEmbedding(embedding).toString('base64'),
      engineVersion,
      score,
      crossRegistryFlagged,
      crossRegistryScore,
      captureReused: input.reuseCapture,
      qualityScore: quality?.score ?? null,
    };
    const linkToken = await store.issueLinkToken(claims, config.identity.linkTokenTtlSeconds);
    await this.deps.biometric.record(userId, 'verify_face', 'match');
    metrics.outcome('verify_face', 'match');
    return { outcome: 'match', linkToken, expiresIn: config.identity.linkTokenTtlSeconds, score, quality };
  }

  async link(input: { userId: string; registry: Registry; linkToken: string; userAgent: string | null }): Promise<LinkResult> {
    const { users, embeddings, store, metrics } = this.deps;
    const { userId, registry } = input;
    const got = await store.takeLinkToken(input.linkToken, registry, userId);
    if (!got) {
      metrics.outcome('link', 'not_found');
      throw new AppError('not_found', 'Unknown, expired or already used linkToken');
    }
    const { claims } = got;
    const hint = deviceHint(input.userAgent);
    const embedding = Array.from(decodeEmbedding(Buffer.from(claims.embedding, 'base64')));
    const { dedupe } = this.deps;

    try {
      // One person, one identity: the face against every other account and the watch-list.
      const hits = await dedupe.screen(userId, embedding, claims.engineVersion);
      const capture = hits.length ? await this.liveCapture(userId) : null;
      if (dedupe.blocks(hits)) {
        const caseIds = await this.deps.unitOfWork.run(async (trx) => {
          const ids = await dedupe.openCases({ userId, registry, hits, capture, blocked: true }, trx);
          await this.deps.auditEvents.record(
            {
              type: 'identity.link_refused',
              severity: 'high',
              actorType: 'consumer',
              actorId: userId,
              subjectType: 'user',
              subjectId: userId,
              data: { registry, number: maskTail(claims.number, 3), reason: 'duplicate_identity', caseIds: ids },
            },
            trx,
          );
          return ids;
        });
        dedupe.casesOpened(hits, caseIds, userId);
        metrics.outcome('link', 'duplicate_identity');
        // Nothing about the other account (or the watch-list) reaches the consumer.
        throw new AppError('duplicate_identity', 'This identity cannot be linked to your account; contact support', {
          extra: { outcome: 'duplicate_identity' },
        });
      }
      let caseIds: string[] = [];
      const linkedAt = await this.deps.unitOfWork.run(async (trx) => {
        // A number still held by a deleted account is free again (as its phone number is): the stale
        // link row gives way, and an AuditEvent keeps the release on the deleted account's record.
        const released = await users.releaseFromDeletedAccounts(registry, claims.number, trx);
        for (const r of released) {
          await this.deps.auditEvents.record(
            {
              type: 'identity.link_released',
              actorType: 'consumer',
              actorId: userId,
              subjectType: 'user',
              subjectId: r.userId,
              data: { registry, number: maskTail(claims.number, 3), linkedAt: new Date(r.linkedAt).toISOString(), reason: 'relinked_after_account_deletion' },
            },
            trx,
          );
        }
        const row = await users.insertLink(
          registry,
          {
            userId,
            number: claims.number,
            registryRecord: claims.record,
            deviceHint: hint,
            matchScore: claims.score,
            crossRegistryFlagged: claims.crossRegistryFlagged,
          },
          trx,
        );

        // The first link fills the profile from the registry record.
        const otherLinked = await users.hasLink(OTHER[registry], userId, trx);
        if (!otherLinked) {
          await users.fillProfile(userId, { name: fullName(claims.record), dateOfBirth: claims.record.dateOfBirth, gender: claims.record.gender }, trx);
        }
        await this.deps.auditEvents.record(
          {
            type: 'identity.linked',
            actorType: 'consumer',
            actorId: userId,
            subjectType: 'user',
            subjectId: userId,
            data: {
              registry,
              number: maskTail(claims.number, 3),
              deviceHint: hint,
              score: claims.score,
              captureReused: claims.captureReused,
              crossRegistryFlagged: claims.crossRegistryFlagged,
              ...(claims.crossRegistryScore !== null ? { crossRegistryScore: claims.crossRegistryScore } : {}),
              profileFilled: !otherLinked,
            },
          },
          trx,
        );
        caseIds = await dedupe.openCases({ userId, registry, hits, capture, blocked: false }, trx);
        // Last: the change-log lock is held until the transaction ends.
        await embeddings.upsert(userId, embedding, registry === 'nin' ? 'link_nin' : 'link_bvn', claims.engineVersion, trx, claims.qualityScore ?? null);
        return row.linkedAt;
      });
      dedupe.casesOpened(hits, caseIds, userId);
      metrics.outcome('link', 'linked');
      this.deps.logger.info({ userId, registry, crossRegistryFlagged: claims.crossRegistryFlagged }, 'identity linked');
      return { status: 'linked', registry, linkedAt: new Date(linkedAt).toISOString() };
    } catch (e) {
      if (isUniqueViolation(e)) {
        metrics.outcome('link', 'conflict');
        throw new AppError('conflict', `This ${LABEL[registry]} was linked to an account meanwhile, or your account already has one`);
      }
      // A refused link stays refused: the token is spent.
      if (e instanceof AppError && e.code === 'duplicate_identity') throw e;
      // Nothing was linked (the transaction rolled back): give the token back for a retry.
      await store.restoreLinkToken(input.linkToken, registry, userId, got.taken).catch(() => {});
      throw e;
    }
  }
}
