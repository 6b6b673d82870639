/**
 * Identity linking (SPEC sections 2, 3, 4 and 7): validate a NIN or BVN against the registry, prove
 * with a live capture that the face matches the registry photo, then link.
 *
 * Server-side state, all in Redis under the deployment prefix, keyed by the SHA-256 of each token
 * (the tokens themselves are never stored or logged):
 * - validation  `identity:validation:<hash>`: a hash { meta (user, registry, number, record), photo }
 *   with TTL VALIDATION_TOKEN_TTL_SECONDS. The registry photo lives only here and is dropped (the whole
 *   key is deleted) by the first passing verify-face, or by the TTL.
 * - attempts    `identity:verify-attempts:<hash>`: verify-face attempts of one validationToken
 *   (INCR; at most VERIFY_FACE_MAX_ATTEMPTS, then 429 `rate_limited` with Retry-After).
 * - capture     `identity:capture:<userId>`: the embedding of the user's most recent passing NIN
 *   capture, for `reuseCapture=true`, with TTL CAPTURE_REUSE_SECONDS (never in a job).
 * - link        `identity:link:<registry>:<userId>:<hash>`: the linkToken's claims (user, registry,
 *   number, record, the capture's embedding), TTL LINK_TOKEN_TTL_SECONDS. Binding the user and the
 *   registry into the key means another user's (or the other route's) token is simply not found, and
 *   is not burnt for its owner. Consumption is one Lua script (get + delete), so under concurrent
 *   replay exactly one request links.
 *
 * The service reaches the registry only through RegistryClient (HTTP), does face work only through
 * FaceService (the workers), and writes the canonical embedding only through embedding-store.ts.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../../shared/config.js';
import { decodeEmbedding, encodeEmbedding } from '../../shared/embeddings.js';
import { AppError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { KeySpace, Redis } from '../../shared/redis.js';
import type { RegistryRecordSnapshot } from '../../models/index.js';
import { qualitySummary, type QualitySummary } from '../../shared/face-quality.js';
import type { Metrics } from '../metrics.js';
import { maskTail, recordAudit } from './audit-events.js';
import { upsertCanonical } from './embedding-store.js';
import { countInWindow, HOUR_MS } from './rate-limit.js';
import type { FaceService } from './face-service.js';
import type { Registry, RegistryClient, RegistryRecord } from './registry-client.js';

export type { Registry } from './registry-client.js';

export interface IdentityDeps {
  config: Config;
  db: Knex;
  redis: Redis;
  keys: KeySpace;
  metrics: Metrics;
  logger: Logger;
  face: FaceService;
  registry: RegistryClient;
}

export type FaceOutcome = 'match' | 'liveness_failed' | 'face_mismatch' | 'cross_registry_mismatch' | 'no_face' | 'multiple_faces';

export const OTHER: Record<Registry, Registry> = { nin: 'bvn', bvn: 'nin' };
const LABEL: Record<Registry, string> = { nin: 'NIN', bvn: 'BVN' };
const TOKEN_BYTES = 32;
const linkTable = (r: Registry) => (r === 'nin' ? 'ninLinks' : 'bvnLinks');

// ------------------------------------------------------------------------------------------
// Small pure helpers (exported for the tests and the docs)
// ------------------------------------------------------------------------------------------

/** "George Walker Bush" → "G***** W***** B***": the first letter of each word kept, the rest stars. */
export function maskName(name: string): string {
  return name
    .trim()
    .split(/\s+/)
    .filter(Boolean)
    .map((w) => {
      const chars = Array.from(w);
      return chars[0]! + '*'.repeat(chars.length - 1);
    })
    .join(' ');
}

export const fullName = (r: { firstName: string; middleName?: string | null; lastName: string }) =>
  [r.firstName, r.middleName, r.lastName].filter((p) => p && p.trim()).join(' ');

/** A coarse device description from a User-Agent: never the raw string, never a version. */
export function deviceHint(userAgent: string | null | undefined): string {
  const ua = userAgent ?? '';
  if (/iPad/i.test(ua)) return 'iPad';
  if (/iPhone|iPod/i.test(ua)) return 'iPhone';
  if (/Android/i.test(ua)) return /Mobile/i.test(ua) ? 'Android phone' : 'Android tablet';
  if (/okhttp/i.test(ua)) return 'Android device';
  if (/CFNetwork|Darwin/i.test(ua)) return 'Apple device';
  if (/Windows Phone/i.test(ua)) return 'Windows phone';
  if (/Windows/i.test(ua)) return 'Windows computer';
  if (/CrOS/i.test(ua)) return 'Chromebook';
  if (/Macintosh|Mac OS X/i.test(ua)) return 'Mac computer';
  if (/Linux|X11/i.test(ua)) return 'Linux computer';
  return 'unknown device';
}

const nameWords = (s: string | null | undefined) =>
  (s ?? '')
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();

/**
 * Which of name and date of birth disagree between two registry records. Names compare without case,
 * accents or punctuation; first and last name may be swapped (registries disagree on order); the
 * middle name is not compared (one registry often lacks it).
 */
export function recordDisagreements(a: RegistryRecordSnapshot, b: RegistryRecordSnapshot): Array<'name' | 'dateOfBirth'> {
  const out: Array<'name' | 'dateOfBirth'> = [];
  const [af, al, bf, bl] = [nameWords(a.firstName), nameWords(a.lastName), nameWords(b.firstName), nameWords(b.lastName)];
  const sameName = (af === bf && al === bl) || (af === bl && al === bf);
  if (!sameName) out.push('name');
  if (a.dateOfBirth !== b.dateOfBirth) out.push('dateOfBirth');
  return out;
}

const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');
const newToken = (prefix: string) => `${prefix}_${randomBytes(TOKEN_BYTES).toString('base64url')}`;
const snapshot = (r: RegistryRecord): RegistryRecordSnapshot => ({
  firstName: r.firstName,
  lastName: r.lastName,
  middleName: r.middleName ?? null,
  dateOfBirth: r.dateOfBirth,
  gender: r.gender,
});

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

// ------------------------------------------------------------------------------------------
// Redis state
// ------------------------------------------------------------------------------------------

interface ValidationMeta {
  userId: string;
  registry: Registry;
  number: string;
  record: RegistryRecordSnapshot;
  photoMime: string;
  issuedAt: string;
}

interface LinkClaims {
  userId: string;
  registry: Registry;
  number: string;
  record: RegistryRecordSnapshot;
  /** float32 LE, base64 */
  embedding: string;
  engineVersion: string;
  score: number;
  crossRegistryFlagged: boolean;
  crossRegistryScore: number | null;
  captureReused: boolean;
  /** Capture quality score (0..100), stored with the canonical embedding by link; null when unknown. */
  qualityScore?: number | null;
}

const validationKey = (d: Pick<IdentityDeps, 'keys'>, hash: string) => d.keys('identity', 'validation', hash);
const attemptsKey = (d: Pick<IdentityDeps, 'keys'>, hash: string) => d.keys('identity', 'verify-attempts', hash);
const captureKey = (d: Pick<IdentityDeps, 'keys'>, userId: string) => d.keys('identity', 'capture', userId);
/** The user's one live validation per registry (its token hash): a new validation replaces the old one. */
const currentValidationKey = (d: Pick<IdentityDeps, 'keys'>, userId: string, registry: Registry) => d.keys('identity', 'current-validation', userId, registry);
const validateRateKey = (d: Pick<IdentityDeps, 'keys'>, userId: string) => d.keys('identity', 'validate-rate', userId);
const linkKey = (d: Pick<IdentityDeps, 'keys'>, registry: Registry, userId: string, hash: string) => d.keys('identity', 'link', registry, userId, hash);

// KEYS[1] = link key: returns { value, pttl } and deletes the key, or nil. Atomic: one winner.
const CONSUME_LUA = `
local v = redis.call('GET', KEYS[1])
if not v then return nil end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
return { v, ttl }`;

// KEYS[1] = attempts key, KEYS[2] = validation key: counts one attempt, expiring with the validation.
const ATTEMPT_LUA = `
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[2])
if ttl < 1000 then ttl = 1000 end
if n == 1 then redis.call('PEXPIRE', KEYS[1], ttl) end
return { n, redis.call('PTTL', KEYS[1]) }`;

// ------------------------------------------------------------------------------------------
// validate
// ------------------------------------------------------------------------------------------

export type ValidateResult =
  | { validationToken: string; matchedName: string; expiresIn: number }
  | { alreadyLinked: true; linkedAt: string; deviceHint: string };

export async function validate(
  deps: IdentityDeps,
  input: { userId: string; registry: Registry; number: string; fault?: string | null },
): Promise<ValidateResult> {
  const { db, config } = deps;
  const { userId, registry, number } = input;

  // Each validation caches a registry photo and buys verify-face attempts: cap them per consumer.
  const { count, resetInSeconds } = await countInWindow(deps.redis, validateRateKey(deps, userId), HOUR_MS);
  if (count > config.validationsPerUserPerHour) {
    deps.metrics.outcome(`validate_${registry}`, 'rate_limited');
    throw new AppError('rate_limited', `At most ${config.validationsPerUserPerHour} validations per hour; try again later`, { retryAfter: resetInSeconds });
  }

  // Linked to some account already? To another live account: only the date and a coarse device hint.
  const existing = (await db(linkTable(registry))
    .join('users', 'users.id', `${linkTable(registry)}.userId`)
    .where(`${linkTable(registry)}.${registry}`, number)
    .first(`${linkTable(registry)}.userId as userId`, `${linkTable(registry)}.linkedAt as linkedAt`, `${linkTable(registry)}.deviceHint as deviceHint`, 'users.deletedAt as deletedAt')) as
    | { userId: string; linkedAt: Date; deviceHint: string | null; deletedAt: Date | null }
    | undefined;
  if (existing && existing.userId === userId) {
    throw new AppError('conflict', `This ${LABEL[registry]} is already linked to your account`);
  }
  if (existing && !existing.deletedAt) {
    deps.metrics.outcome(`validate_${registry}`, 'already_linked');
    return { alreadyLinked: true, linkedAt: new Date(existing.linkedAt).toISOString(), deviceHint: existing.deviceHint || 'unknown device' };
  }
  const mine = await db(linkTable(registry)).where({ userId }).first('id');
  if (mine) throw new AppError('conflict', `Your account already has a ${LABEL[registry]} linked`);

  const record = await deps.registry.lookup(registry, number, { includePhoto: true, fault: input.fault });
  if (!record) {
    deps.metrics.outcome(`validate_${registry}`, 'not_found');
    throw new AppError('not_found', `The registry has no record of this ${LABEL[registry]}`);
  }

  // The other registry, when linked, must describe the same person.
  const other = (await db(linkTable(OTHER[registry])).where({ userId }).first('registryRecord')) as { registryRecord: RegistryRecordSnapshot } | undefined;
  if (other) {
    const fields = recordDisagreements(other.registryRecord, snapshot(record));
    if (fields.length) {
      deps.metrics.outcome(`validate_${registry}`, 'registry_mismatch');
      deps.logger.warn({ userId, registry, fields }, 'registry_mismatch: record disagrees with the linked registry');
      throw new AppError('registry_mismatch', `The ${LABEL[registry]} record does not match your linked ${LABEL[OTHER[registry]]} (${fields.join(', ')})`, { details: { fields } });
    }
  }

  const validationToken = newToken('vt');
  const meta: ValidationMeta = { userId, registry, number, record: snapshot(record), photoMime: record.photoMime ?? 'application/octet-stream', issuedAt: new Date().toISOString() };
  const tokenHash = hashToken(validationToken);
  const key = validationKey(deps, tokenHash);
  await deps.redis.multi().hset(key, 'meta', JSON.stringify(meta), 'photo', record.photo!).expire(key, config.validationTokenTtlSeconds).exec();
  // One live validation (one cached registry photo) per consumer and registry: the previous one ends here.
  const previous = (await deps.redis.set(currentValidationKey(deps, userId, registry), tokenHash, 'EX', config.validationTokenTtlSeconds, 'GET')) as string | null;
  if (previous && previous !== tokenHash) await deps.redis.del(validationKey(deps, previous));
  deps.metrics.outcome(`validate_${registry}`, 'validated');
  return { validationToken, matchedName: maskName(fullName(record)), expiresIn: config.validationTokenTtlSeconds };
}

// ------------------------------------------------------------------------------------------
// verify-face
// ------------------------------------------------------------------------------------------

export interface VerifyFaceInput {
  userId: string;
  registry: Registry;
  validationToken: string;
  /** The live capture; absent when reuseCapture is true. */
  file?: Buffer;
  reuseCapture: boolean;
}

export interface VerifyFaceMatch {
  outcome: 'match';
  linkToken: string;
  expiresIn: number;
  score: number;
  /** Advisory capture quality of the live capture (of the reused one with reuseCapture); null when unknown. */
  quality: QualitySummary | null;
}

async function loadValidation(deps: IdentityDeps, hash: string, userId: string, registry: Registry): Promise<ValidationMeta> {
  const raw = await deps.redis.hget(validationKey(deps, hash), 'meta');
  const meta = raw ? (JSON.parse(raw) as ValidationMeta) : null;
  if (!meta || meta.userId !== userId || meta.registry !== registry) {
    throw new AppError('not_found', `Unknown or expired validationToken: validate the ${LABEL[registry]} again`);
  }
  return meta;
}

/** The user's reusable NIN capture (embedding), or null outside the reuse window. */
async function loadCapture(deps: IdentityDeps, userId: string): Promise<{ embedding: number[]; engineVersion: string; quality: QualitySummary | null } | null> {
  const [emb, engineVersion, quality] = await deps.redis.hmgetBuffer(captureKey(deps, userId), 'embedding', 'engineVersion', 'quality');
  if (!emb || !engineVersion) return null;
  return {
    embedding: Array.from(decodeEmbedding(emb)),
    engineVersion: engineVersion.toString('utf8'),
    quality: quality ? (JSON.parse(quality.toString('utf8')) as QualitySummary) : null,
  };
}

export async function verifyFace(deps: IdentityDeps, input: VerifyFaceInput): Promise<VerifyFaceMatch> {
  const { config, redis, face, metrics, logger } = deps;
  const { userId, registry } = input;
  const hash = hashToken(input.validationToken);
  const meta = await loadValidation(deps, hash, userId, registry);

  // Every attempt counts, whatever its outcome, before any face work.
  const [attempts, attemptsTtlMs] = (await redis.eval(ATTEMPT_LUA, 2, attemptsKey(deps, hash), validationKey(deps, hash))) as [number, number];
  if (attempts > config.verifyFaceMaxAttempts) {
    metrics.outcome('verify_face', 'rate_limited');
    throw new AppError('rate_limited', `At most ${config.verifyFaceMaxAttempts} verify-face attempts per validationToken; validate again later`, {
      retryAfter: Math.max(1, Math.ceil(attemptsTtlMs / 1000)),
    });
  }

  const photo = await redis.hgetBuffer(validationKey(deps, hash), 'photo');
  if (!photo) throw new AppError('not_found', `Unknown or expired validationToken: validate the ${LABEL[registry]} again`);

  let embedding: number[];
  let engineVersion: string;
  let score: number;
  let quality: QualitySummary | null;
  if (input.reuseCapture) {
    const capture = await loadCapture(deps, userId);
    if (!capture) {
      throw new AppError('not_found', `No passing NIN capture of yours within the last ${config.captureReuseSeconds} s to reuse; send a live capture (file)`);
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
      metrics.outcome('verify_face', 'face_mismatch');
      throw faceError('face_mismatch', undefined, quality);
    }
  } else {
    const v = await face.verifyAgainstPhoto(input.file!, photo);
    quality = qualitySummary(v.quality);
    if (v.outcome !== 'match') {
      metrics.outcome('verify_face', v.outcome);
      throw faceError(v.outcome, undefined, quality);
    }
    embedding = v.embedding!.embedding;
    engineVersion = v.embedding!.engineVersion;
    score = v.score!;
  }

  // Cross-registry: when the other registry is linked, the face must also match the canonical embedding.
  let crossRegistryFlagged = false;
  let crossRegistryScore: number | null = null;
  const otherLinked = await deps.db(linkTable(OTHER[registry])).where({ userId }).first('id');
  if (otherLinked) {
    const c = await face.compareWithUser(embedding, userId);
    crossRegistryScore = c.score;
    if (c.score === null) {
      logger.info({ userId, registry, reason: c.reason }, 'cross-registry check skipped: no comparable canonical embedding');
    } else if (c.score < config.matchThreshold) {
      const policy = config.crossRegistryMismatchPolicy;
      const action = policy === 'hard-block' ? 'blocked' : 'flagged';
      await recordAudit(deps.db, {
        type: 'identity.cross_registry_mismatch',
        severity: 'high',
        actorType: 'consumer',
        actorId: userId,
        subjectType: 'user',
        subjectId: userId,
        data: { registry, otherRegistry: OTHER[registry], number: maskTail(meta.number, 3), policy, action, score: c.score, threshold: config.matchThreshold, captureReused: input.reuseCapture },
      });
      logger.warn(
        { event: 'cross_registry_mismatch', severity: 'high', userId, registry, policy, action, score: c.score },
        'cross_registry_mismatch: the face does not match the account\'s other linked registry',
      );
      if (policy === 'hard-block') {
        metrics.outcome('verify_face', 'cross_registry_mismatch');
        throw faceError('cross_registry_mismatch', undefined, quality);
      }
      crossRegistryFlagged = true;
    }
  }

  // Pass: the validation (and its registry photo) is dropped; only one concurrent pass gets a linkToken.
  const [[, deleted]] = (await redis.multi().del(validationKey(deps, hash)).del(attemptsKey(deps, hash)).exec()) as [[Error | null, number], unknown];
  if (deleted !== 1) throw new AppError('not_found', `Unknown or expired validationToken: validate the ${LABEL[registry]} again`);

  if (registry === 'nin' && !input.reuseCapture) {
    const key = captureKey(deps, userId);
    await redis
      .multi()
      .del(key)
      .hset(key, 'embedding', encodeEmbedding(embedding), 'engineVersion', engineVersion, 'capturedAt', new Date().toISOString(), ...(quality ? ['quality', JSON.stringify(quality)] : []))
      .expire(key, Math.max(1, config.captureReuseSeconds))
      .exec();
  }

  const linkToken = newToken('lt');
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
  await redis.set(linkKey(deps, registry, userId, hashToken(linkToken)), JSON.stringify(claims), 'EX', config.linkTokenTtlSeconds);
  metrics.outcome('verify_face', 'match');
  return { outcome: 'match', linkToken, expiresIn: config.linkTokenTtlSeconds, score, quality };
}

// ------------------------------------------------------------------------------------------
// link
// ------------------------------------------------------------------------------------------

export interface LinkResult {
  status: 'linked';
  registry: Registry;
  linkedAt: string;
}

const isUniqueViolation = (e: unknown) => (e as { code?: string })?.code === '23505';

export async function link(
  deps: IdentityDeps,
  input: { userId: string; registry: Registry; linkToken: string; userAgent: string | null },
): Promise<LinkResult> {
  const { db, redis, metrics } = deps;
  const { userId, registry } = input;
  const key = linkKey(deps, registry, userId, hashToken(input.linkToken));
  const got = (await redis.eval(CONSUME_LUA, 1, key)) as [string, number] | null;
  if (!got) {
    metrics.outcome('link', 'not_found');
    throw new AppError('not_found', 'Unknown, expired or already used linkToken');
  }
  const [raw, pttl] = got;
  const claims = JSON.parse(raw) as LinkClaims;
  const hint = deviceHint(input.userAgent);
  const embedding = Array.from(decodeEmbedding(Buffer.from(claims.embedding, 'base64')));
  const table = linkTable(registry);

  try {
    const linkedAt = await db.transaction(async (trx) => {
      // A number still held by a deleted account is free again (as its phone number is): the stale
      // link row gives way, and an AuditEvent keeps the release on the deleted account's record.
      const released = (await trx(table)
        .where(registry, claims.number)
        .whereIn('userId', trx('users').select('id').whereNotNull('deletedAt'))
        .del()
        .returning(['userId', 'linkedAt'])) as { userId: string; linkedAt: Date }[];
      for (const r of released) {
        await recordAudit(trx, {
          type: 'identity.link_released',
          actorType: 'consumer',
          actorId: userId,
          subjectType: 'user',
          subjectId: r.userId,
          data: { registry, number: maskTail(claims.number, 3), linkedAt: new Date(r.linkedAt).toISOString(), reason: 'relinked_after_account_deletion' },
        });
      }
      const [row] = (await trx(table)
        .insert({
          userId,
          [registry]: claims.number,
          registryRecord: JSON.stringify(claims.record),
          deviceHint: hint,
          matchScore: claims.score,
          crossRegistryFlagged: claims.crossRegistryFlagged,
        })
        .returning(['linkedAt'])) as { linkedAt: Date }[];

      // The first link fills the profile from the registry record.
      const otherLink = await trx(linkTable(OTHER[registry])).where({ userId }).first('id');
      if (!otherLink) {
        await trx('users')
          .where({ id: userId })
          .update({ name: fullName(claims.record), dateOfBirth: claims.record.dateOfBirth, gender: claims.record.gender, updatedAt: trx.fn.now() });
      }
      await recordAudit(trx, {
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
          profileFilled: !otherLink,
        },
      });
      // Last: the change-log lock is held until the transaction ends.
      await upsertCanonical(db, userId, embedding, registry === 'nin' ? 'link_nin' : 'link_bvn', claims.engineVersion, trx, claims.qualityScore ?? null);
      return row!.linkedAt;
    });
    metrics.outcome('link', 'linked');
    deps.logger.info({ userId, registry, crossRegistryFlagged: claims.crossRegistryFlagged }, 'identity linked');
    return { status: 'linked', registry, linkedAt: new Date(linkedAt).toISOString() };
  } catch (e) {
    if (isUniqueViolation(e)) {
      metrics.outcome('link', 'conflict');
      throw new AppError('conflict', `This ${LABEL[registry]} was linked to an account meanwhile, or your account already has one`);
    }
    // Nothing was linked (the transaction rolled back): give the token back for a retry.
    if (pttl > 0) await redis.set(key, raw, 'PX', pttl, 'NX').catch(() => {});
    throw e;
  }
}
