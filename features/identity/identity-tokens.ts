/**
 * The identity workflow's server-side state, all in Redis under the deployment prefix, keyed by the
 * SHA-256 of each token (the tokens themselves are never stored or logged):
 * - validation  `identity:validation:<hash>`: a hash { meta (user, registry, number, record; sealed), photo (sealed) }
 *   with TTL VALIDATION_TOKEN_TTL_SECONDS. The registry photo lives only here and is dropped (the whole
 *   key is deleted) by the first passing verify-face, or by the TTL.
 * - current     `identity:current-validation:<userId>:<registry>`: the user's one live validation per
 *   registry (its token hash): a new validation replaces, and drops, the previous one.
 * - attempts    `identity:verify-attempts:<hash>`: verify-face attempts of one validationToken,
 *   expiring with the validation.
 * - capture     `identity:capture:<userId>`: the embedding of the user's most recent passing NIN
 *   capture, for `reuseCapture=true`, with TTL CAPTURE_REUSE_SECONDS (never in a job).
 * - link        `identity:link:<registry>:<userId>:<hash>`: a single-use token (platform/redis/single-use-token.ts)
 *   holding the linkToken's claims. Binding the user and the registry into the key means another user's
 *   (or the other route's) token is simply not found, and is not burnt for its owner.
 * - validate-rate `identity:validate-rate:<userId>`: validations per consumer per hour.
 * - live capture `identity:live-capture:<userId>`: the user's most recent passing live capture (JPEG),
 *   sealed by the biometric key ring by the caller, kept as long as a link may still use it: the
 *   review evidence of a duplicate-identity case the link opens.
 *
 * The biometric values among them (the registry photo, the capture's embedding, the embedding inside
 * link-token claims) and the registry values (the NIN or BVN and the registry record: name, date of
 * birth, gender, in a validation's meta and in link-token claims) are sealed with the process's
 * biometric key ring (AES-256-GCM, bound to the key they live under): the key is held by the processes
 * and never written to Redis, so a Redis dump, an RDB/AOF file or a replica holds no face and no
 * identity.
 */
import type { QualitySummary } from '../../platform/face/quality.js';
import type { RegistryRecordSnapshot } from '../../models/index.js';
import { decodeEmbedding, encodeEmbedding } from '../../platform/face/embeddings.js';
import type { KeySpace, Redis } from '../../platform/redis/redis.js';
import { KeyRingError, type KeyRing } from '../../platform/keys/key-ring.js';
import { processKeyRing } from '../../platform/keys/templates.js';
import { hashToken, newToken, SingleUseTokens, type TakenToken } from '../../platform/redis/single-use-token.js';
import { countInWindow, HOUR_MS } from '../../platform/redis/window-counter.js';
import type { Registry } from '../users/index.js';

export interface ValidationMeta {
  userId: string;
  registry: Registry;
  number: string;
  record: RegistryRecordSnapshot;
  photoMime: string;
  issuedAt: string;
}

export interface LinkClaims {
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

// KEYS[1] = attempts key, KEYS[2] = validation key: counts one attempt, expiring with the validation.
const ATTEMPT_LUA = `
local n = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[2])
if ttl < 1000 then ttl = 1000 end
if n == 1 then redis.call('PEXPIRE', KEYS[1], ttl) end
return { n, redis.call('PTTL', KEYS[1]) }`;

export class IdentityTokenStore {
  private readonly linkTokens: SingleUseTokens<[Registry, string]>;

  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
    private readonly ring: KeyRing = processKeyRing(),
  ) {
    this.linkTokens = new SingleUseTokens(redis, (hash, registry, userId) => keys('identity', 'link', registry, userId, hash));
  }

  private validationKey = (hash: string) => this.keys('identity', 'validation', hash);
  private attemptsKey = (hash: string) => this.keys('identity', 'verify-attempts', hash);
  private captureKey = (userId: string) => this.keys('identity', 'capture', userId);
  private currentValidationKey = (userId: string, registry: Registry) => this.keys('identity', 'current-validation', userId, registry);

  /** Counts one validation of the consumer in the current hour. */
  countValidation(userId: string): Promise<{ count: number; resetInSeconds: number }> {
    return countInWindow(this.redis, this.keys('identity', 'validate-rate', userId), HOUR_MS);
  }

  // ---- validations -------------------------------------------------------------------------

  /** Stores a validation with its registry photo; the user's previous one for this registry ends here. */
  async saveValidation(meta: ValidationMeta, photo: Buffer, ttlSeconds: number): Promise<string> {
    const validationToken = newToken('vt');
    const tokenHash = hashToken(validationToken);
    const key = this.validationKey(tokenHash);
    const sealed = this.ring.seal('captures', photo, `validation-photo:${tokenHash}`);
    const sealedMeta = this.ring.seal('registry-values', Buffer.from(JSON.stringify(meta), 'utf8'), `validation-meta:${tokenHash}`);
    await this.redis.multi().hset(key, 'meta', sealedMeta, 'photo', sealed).expire(key, ttlSeconds).exec();
    const previous = (await this.redis.set(this.currentValidationKey(meta.userId, meta.registry), tokenHash, 'EX', ttlSeconds, 'GET')) as string | null;
    if (previous && previous !== tokenHash) await this.redis.del(this.validationKey(previous));
    return validationToken;
  }

  async validationMeta(validationToken: string): Promise<ValidationMeta | null> {
    const tokenHash = hashToken(validationToken);
    const sealed = await this.redis.hgetBuffer(this.validationKey(tokenHash), 'meta');
    if (!sealed) return null;
    try {
      return JSON.parse(this.ring.open('registry-values', sealed, `validation-meta:${tokenHash}`).toString('utf8')) as ValidationMeta;
    } catch (e) {
      // Written before the values were sealed, or under a key the ring no longer holds: redo the validation.
      if (e instanceof KeyRingError || e instanceof SyntaxError) return null;
      throw e;
    }
  }

  async validationPhoto(validationToken: string): Promise<Buffer | null> {
    const tokenHash = hashToken(validationToken);
    const sealed = await this.redis.hgetBuffer(this.validationKey(tokenHash), 'photo');
    return sealed ? this.ring.open('captures', sealed, `validation-photo:${tokenHash}`) : null;
  }

  /** Counts one verify-face attempt of a validation: how many so far, and the milliseconds they stay counted. */
  async countAttempt(validationToken: string): Promise<{ attempts: number; ttlMs: number }> {
    const hash = hashToken(validationToken);
    const [attempts, ttlMs] = (await this.redis.eval(ATTEMPT_LUA, 2, this.attemptsKey(hash), this.validationKey(hash))) as [number, number];
    return { attempts, ttlMs };
  }

  /** Drops a validation (and its photo) once; false when it was gone already (a concurrent pass won). */
  async dropValidation(validationToken: string): Promise<boolean> {
    const hash = hashToken(validationToken);
    const [[, deleted]] = (await this.redis.multi().del(this.validationKey(hash)).del(this.attemptsKey(hash)).exec()) as [[Error | null, number], unknown];
    return deleted === 1;
  }

  // ---- the reusable NIN capture ------------------------------------------------------------

  async saveCapture(userId: string, embedding: number[], engineVersion: string, quality: QualitySummary | null, ttlSeconds: number): Promise<void> {
    const key = this.captureKey(userId);
    await this.redis
      .multi()
      .del(key)
      .hset(
        key,
        'embedding',
        this.ring.seal('templates', encodeEmbedding(embedding), `capture:${userId}`),
        'engineVersion',
        engineVersion,
        'capturedAt',
        new Date().toISOString(),
        ...(quality ? ['quality', JSON.stringify(quality)] : []),
      )
      .expire(key, Math.max(1, ttlSeconds))
      .exec();
  }

  /**
   * The user's reusable NIN capture (embedding), or null outside the reuse window, or when it no
   * longer opens (sealed under a ring key dropped before it expired): the consumer takes a new selfie.
   */
  async capture(userId: string): Promise<{ embedding: number[]; engineVersion: string; quality: QualitySummary | null } | null> {
    const [emb, engineVersion, quality] = await this.redis.hmgetBuffer(this.captureKey(userId), 'embedding', 'engineVersion', 'quality');
    if (!emb || !engineVersion) return null;
    let plain: Buffer;
    try {
      plain = this.ring.open('templates', emb, `capture:${userId}`);
    } catch (e) {
      if (e instanceof KeyRingError) return null;
      throw e;
    }
    return {
      embedding: Array.from(decodeEmbedding(plain)),
      engineVersion: engineVersion.toString('utf8'),
      quality: quality ? (JSON.parse(quality.toString('utf8')) as QualitySummary) : null,
    };
  }

  // ---- the sealed live capture (review evidence) ----------------------------------------

  async saveLiveCapture(userId: string, sealed: Buffer, ttlSeconds: number): Promise<void> {
    await this.redis.set(this.keys('identity', 'live-capture', userId), sealed, 'EX', Math.max(1, ttlSeconds));
  }

  liveCapture(userId: string): Promise<Buffer | null> {
    return this.redis.getBuffer(this.keys('identity', 'live-capture', userId));
  }

  // ---- erasure -------------------------------------------------------------------------------

  /**
   * Deletes every key of the user (an erasure): the current validations with their registry photo and
   * attempt counts, the reusable capture, the link tokens (found by SCAN: their key names the user),
   * the validation counter. Returns how many keys went.
   */
  async purgeUser(userId: string): Promise<number> {
    const keys: string[] = [this.captureKey(userId), this.keys('identity', 'validate-rate', userId), this.keys('identity', 'live-capture', userId)];
    for (const registry of ['nin', 'bvn'] as const) {
      const current = this.currentValidationKey(userId, registry);
      const hash = await this.redis.get(current);
      keys.push(current);
      if (hash) keys.push(this.validationKey(hash), this.attemptsKey(hash));
      let cursor = '0';
      do {
        const [next, found] = await this.redis.scan(cursor, 'MATCH', this.keys('identity', 'link', registry, userId, '*'), 'COUNT', 500);
        cursor = next;
        keys.push(...found);
      } while (cursor !== '0');
    }
    return this.redis.del(...keys);
  }

  // ---- link tokens -------------------------------------------------------------------------

  /** Stored as the claims without `number` and `record`, which travel sealed in `identity`, and the embedding sealed. */
  issueLinkToken(claims: LinkClaims, ttlSeconds: number): Promise<string> {
    const { number, record, ...rest } = claims;
    const binding = [claims.registry, claims.userId] as const;
    const embedding = this.ring.seal('templates', Buffer.from(claims.embedding, 'base64'), this.linkEmbeddingBinding(...binding)).toString('base64');
    const identity = this.ring
      .seal('registry-values', Buffer.from(JSON.stringify({ number, record }), 'utf8'), this.linkIdentityBinding(...binding))
      .toString('base64');
    return this.linkTokens.issue(JSON.stringify({ ...rest, embedding, identity }), ttlSeconds, [claims.registry, claims.userId], { prefix: 'lt' });
  }

  private linkEmbeddingBinding = (registry: Registry, userId: string) => `link-embedding:${registry}:${userId}`;
  private linkIdentityBinding = (registry: Registry, userId: string) => `link-identity:${registry}:${userId}`;

  /** Takes a link token once; null when unknown, expired, used, or another user's or registry's. */
  async takeLinkToken(linkToken: string, registry: Registry, userId: string): Promise<{ claims: LinkClaims; taken: TakenToken } | null> {
    const taken = await this.linkTokens.take(linkToken, [registry, userId]);
    if (!taken) return null;
    const stored = JSON.parse(taken.value) as Omit<LinkClaims, 'number' | 'record'> & { identity: string };
    const { identity: sealedIdentity, ...rest } = stored;
    const embedding = this.ring.open('templates', Buffer.from(stored.embedding, 'base64'), this.linkEmbeddingBinding(registry, userId));
    const identity = JSON.parse(
      this.ring.open('registry-values', Buffer.from(sealedIdentity, 'base64'), this.linkIdentityBinding(registry, userId)).toString('utf8'),
    ) as Pick<LinkClaims, 'number' | 'record'>;
    return { claims: { ...rest, ...identity, embedding: embedding.toString('base64') }, taken };
  }

  /** Gives a taken link token back for a retry (nothing was linked). */
  restoreLinkToken(linkToken: string, registry: Registry, userId: string, taken: TakenToken): Promise<void> {
    return this.linkTokens.restore(linkToken, [registry, userId], taken);
  }
}
