/**
 * Liveness sessions in Redis, under the deployment prefix:
 * - session `liveness:session:<id>`: a hash { owner, steps, lights, lightHoldMs, createdAt, expiresAt, status, reason, stepsSeen, and,
 *   once passed, the best frontal frame's embedding, engine version, quality and JPEG }. It outlives
 *   the session's lifetime by LIVENESS_SESSION_TTL_SECONDS (a late frames call answers
 *   `session_expired`, not 404), then it is gone. The embedding and the JPEG are sealed by the
 *   biometric key ring, bound to the session id: a Redis dump holds no face.
 * - owned `liveness:owned:<principal>`: the ids of the principal's sessions still kept (for the
 *   erasure of an account, and to end the earlier open ones when a new one is created), expiring with
 *   the newest of them.
 * - in flight `liveness:inflight:<principal>`: an operator's one frames call at a time (a lease renewed
 *   while the call runs; a consumer's call takes the face path's per-user claim instead).
 * - rate `liveness:rate:<principal>`: sessions created per principal per hour.
 * - frame digests `liveness:frame:<digest>`: one key per frame ever received within
 *   LIVENESS_REPLAY_WINDOW_SECONDS; the digest is an HMAC of the frame's bytes under a key derived from
 *   the biometric key ring, never the bytes (a digest without the ring says nothing about a frame).
 * - sketch bands `liveness:sketch:<digest>` (only with LIVENESS_NEAR_REPLAY_WINDOW_SECONDS above 0): one
 *   set per keyed digest of one band of a frame's face sketch (frame-sketch.ts), holding
 *   `<session id>:<frame index>` of every frame that had that band, for that window. A band held by
 *   more than SKETCH_BAND_MEMBERS frames says nothing of a copy and is not read.
 */
import { randomUUID } from 'node:crypto';
import type { KeySpace, Redis } from '../../platform/redis/redis.js';
import type { KeyRing } from '../../platform/keys/key-ring.js';
import { decodeEmbedding, encodeEmbedding } from '../../platform/face/embeddings.js';
import type { QualitySummary } from '../../platform/face/quality.js';
import { countInWindow, HOUR_MS } from '../../platform/redis/window-counter.js';
import type { FailureReason, LivenessStep } from './decision.js';

export type SessionStatus = 'open' | 'checking' | 'passed' | 'failed';

export interface StoredSession {
  id: string;
  /** `consumer:<userId>` or `operator:<operatorId>`. */
  owner: string;
  steps: LivenessStep[];
  /** The screen-light sequence (`#RRGGBB`), null when created under LIVENESS_LIGHT=off. */
  lights: string[] | null;
  /** How long the client shows each light (ms); null without lights. */
  lightHoldMs: number | null;
  /** When the server created it (ms). */
  createdAt: number;
  expiresAt: number;
  status: SessionStatus;
  reason: FailureReason | null;
  stepsSeen: (LivenessStep | null)[] | null;
}

/** What a passed session lends its one use: the best frontal frame. */
export interface FrontalFrame {
  embedding: number[];
  engineVersion: string;
  quality: QualitySummary | null;
  jpeg: Buffer;
}

// KEYS[1] = the session. Moves an open session to checking and answers its expiry as it stands at
// the claim (a newer session of the owner may have ended it since it was read); false if it was not open.
const CLAIM_LUA = `
if redis.call('HGET', KEYS[1], 'status') == 'open' then
  redis.call('HSET', KEYS[1], 'status', 'checking')
  return redis.call('HGET', KEYS[1], 'expiresAt')
end
return false`;

// KEYS = the owner's earlier sessions; ARGV[1] = now (ms). Ends every one still open (no frames call
// yet): its expiry becomes now, so its frames call answers session_expired. A session being judged or
// judged keeps its own (a passed one stays usable).
const END_OPEN_LUA = `
local n = 0
for i, k in ipairs(KEYS) do
  if redis.call('HGET', KEYS[i], 'status') == 'open' and tonumber(redis.call('HGET', KEYS[i], 'expiresAt')) > tonumber(ARGV[1]) then
    redis.call('HSET', KEYS[i], 'expiresAt', ARGV[1])
    n = n + 1
  end
end
return n`;

// KEYS[1] = the in-flight key; ARGV[1] = its holder's token, ARGV[2] = lease (ms). Renews it if still held.
const RENEW_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

// KEYS[1] = the in-flight key; ARGV[1] = its holder's token. Releases it if still held.
const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

// KEYS[1] = the session; ARGV = owner, now (ms). Marks a passed, unused, live session of this owner
// used: 1; 0 for any other (the frontal frame is then read by whoever marked it).
const TAKE_LUA = `
local s = redis.call('HMGET', KEYS[1], 'owner', 'status', 'used', 'expiresAt')
if s[1] ~= ARGV[1] or s[2] ~= 'passed' or s[3] or tonumber(s[4]) <= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], 'used', '1')
return 1`;

// KEYS = frame digests; ARGV[1] = window (s). Remembers every digest; answers, per key, 1 if it was
// already known, 0 if this call added it (so the call can forget the ones whose frames did not decode).
const FRAMES_LUA = `
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('SET', k, '1', 'NX', 'EX', ARGV[1]) then out[i] = 0 else out[i] = 1 end
end
return out`;

// KEYS = the band digests of every frame (frame after frame); ARGV[1] = window (s), ARGV[2] = the most
// members a band is read with, ARGV[3..] = each key's member (`<session>:<frame>`). Reads every band
// first (the frames of earlier sessions), then adds this session's: a session never matches itself.
const SKETCH_LUA = `
local out = {}
local cap = tonumber(ARGV[2])
for i, k in ipairs(KEYS) do
  if redis.call('SCARD', k) <= cap then out[i] = redis.call('SMEMBERS', k) else out[i] = {} end
end
for i, k in ipairs(KEYS) do
  redis.call('SADD', k, ARGV[i + 2])
  redis.call('EXPIRE', k, ARGV[1])
end
return out`;

/** A band shared by more frames than this is common to many faces, not a sign of a copy: not read. */
export const SKETCH_BAND_MEMBERS = 128;

export class LivenessSessionStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
    private readonly ring: KeyRing,
  ) {}

  private sessionKey(id: string): string {
    return this.keys('liveness', 'session', id);
  }

  private aad(id: string, what: string): string {
    return `liveness-session:${id}:${what}`;
  }

  countCreation(owner: string): Promise<{ count: number; resetInSeconds: number }> {
    return countInWindow(this.redis, this.keys('liveness', 'rate', owner), HOUR_MS);
  }

  /**
   * Writes a new session and ends the owner's earlier sessions that have had no frames call: one
   * challenge open per principal, so a client cannot draw several and answer the one it likes.
   */
  async create(s: Pick<StoredSession, 'id' | 'owner' | 'steps' | 'lights' | 'lightHoldMs' | 'createdAt' | 'expiresAt'>, keepSeconds: number): Promise<void> {
    const key = this.sessionKey(s.id);
    const owned = this.keys('liveness', 'owned', s.owner);
    const earlier = await this.redis.smembers(owned);
    if (earlier.length) await this.redis.eval(END_OPEN_LUA, earlier.length, ...earlier.map((id) => this.sessionKey(id)), String(s.createdAt));
    const light = s.lights ? ['lights', JSON.stringify(s.lights), 'lightHoldMs', String(s.lightHoldMs)] : [];
    await this.redis
      .multi()
      .hset(
        key,
        'owner',
        s.owner,
        'steps',
        JSON.stringify(s.steps),
        ...light,
        'createdAt',
        String(s.createdAt),
        'expiresAt',
        String(s.expiresAt),
        'status',
        'open',
      )
      .expire(key, keepSeconds)
      .sadd(owned, s.id)
      .expire(owned, keepSeconds)
      .exec();
  }

  /** An operator's one frames call at a time: a token when taken, null while another call holds it. */
  async reserveInFlight(owner: string, leaseMs: number): Promise<string | null> {
    const token = randomUUID();
    const ok = await this.redis.set(this.keys('liveness', 'inflight', owner), token, 'PX', Math.max(1, Math.ceil(leaseMs)), 'NX');
    return ok === 'OK' ? token : null;
  }

  async renewInFlight(owner: string, token: string, leaseMs: number): Promise<void> {
    await this.redis.eval(RENEW_LUA, 1, this.keys('liveness', 'inflight', owner), token, String(Math.max(1, Math.ceil(leaseMs))));
  }

  async releaseInFlight(owner: string, token: string): Promise<void> {
    await this.redis.eval(RELEASE_LUA, 1, this.keys('liveness', 'inflight', owner), token);
  }

  /** Erasure of a consumer: their sessions (and the frontal frames they hold) and their hourly count. */
  async purgeUser(userId: string): Promise<number> {
    const owner = `consumer:${userId}`;
    const owned = this.keys('liveness', 'owned', owner);
    const ids = await this.redis.smembers(owned);
    return this.redis.del(owned, this.keys('liveness', 'rate', owner), ...ids.map((id) => this.sessionKey(id)));
  }

  async get(id: string): Promise<StoredSession | null> {
    const [owner, steps, lights, lightHoldMs, createdAt, expiresAt, status, reason, seen] = await this.redis.hmget(
      this.sessionKey(id),
      'owner',
      'steps',
      'lights',
      'lightHoldMs',
      'createdAt',
      'expiresAt',
      'status',
      'reason',
      'stepsSeen',
    );
    if (!owner || !steps || !expiresAt || !status) return null;
    return {
      id,
      owner,
      steps: JSON.parse(steps) as LivenessStep[],
      lights: lights ? (JSON.parse(lights) as string[]) : null,
      lightHoldMs: lightHoldMs ? Number(lightHoldMs) : null,
      // A session written before creation times were kept (a deployment's first minute): taken as
      // created long ago, so that the timing check cannot refuse it for being answered too soon.
      createdAt: createdAt ? Number(createdAt) : 0,
      expiresAt: Number(expiresAt),
      status: status as SessionStatus,
      reason: (reason || null) as FailureReason | null,
      stepsSeen: seen ? (JSON.parse(seen) as (LivenessStep | null)[]) : null,
    };
  }

  /**
   * Takes the session's one frames call: its expiry as it stands now (a newer session of the owner
   * may have ended it since it was read), or null when another call took it first.
   */
  async claim(id: string): Promise<{ expiresAt: number } | null> {
    const r = (await this.redis.eval(CLAIM_LUA, 1, this.sessionKey(id))) as string | null;
    return r === null ? null : { expiresAt: Number(r) };
  }

  async fail(id: string, reason: FailureReason | null, stepsSeen: (LivenessStep | null)[]): Promise<void> {
    await this.redis.hset(this.sessionKey(id), 'status', 'failed', 'reason', reason ?? '', 'stepsSeen', JSON.stringify(stepsSeen));
  }

  async pass(id: string, stepsSeen: (LivenessStep | null)[], frontal: FrontalFrame): Promise<void> {
    await this.redis.hset(
      this.sessionKey(id),
      'status',
      'passed',
      'stepsSeen',
      JSON.stringify(stepsSeen),
      'embedding',
      this.ring.seal('templates', encodeEmbedding(frontal.embedding), this.aad(id, 'embedding')),
      'engineVersion',
      frontal.engineVersion,
      'quality',
      JSON.stringify(frontal.quality),
      'jpeg',
      this.ring.seal('captures', frontal.jpeg, this.aad(id, 'jpeg')),
    );
  }

  /** The one use of a passed session by its owner within its lifetime; null for any other session. */
  async take(id: string, owner: string, now = Date.now()): Promise<FrontalFrame | null> {
    if ((await this.redis.eval(TAKE_LUA, 1, this.sessionKey(id), owner, String(now))) !== 1) return null;
    const [emb, engineVersion, quality, jpeg] = await this.redis.hmgetBuffer(this.sessionKey(id), 'embedding', 'engineVersion', 'quality', 'jpeg');
    if (!emb || !engineVersion || !jpeg) return null;
    try {
      return {
        embedding: Array.from(decodeEmbedding(this.ring.open('templates', emb, this.aad(id, 'embedding')))),
        engineVersion: engineVersion.toString('utf8'),
        quality: quality ? (JSON.parse(quality.toString('utf8')) as QualitySummary | null) : null,
        jpeg: this.ring.open('captures', jpeg, this.aad(id, 'jpeg')),
      };
    } catch {
      // Sealed under a key no longer in the ring: as if it had never passed.
      return null;
    }
  }

  /**
   * Remembers the band digests of this session's frames' sketches and answers, for each frame, how many
   * of its bands each earlier frame shares (`<session>:<frame>` → count). `bands[j]`: frame j's band
   * digests (none for a frame without a face).
   */
  async recordSketches(sessionId: string, bands: readonly (readonly string[])[], windowSeconds: number): Promise<Map<string, number>[]> {
    const keys: string[] = [];
    const members: string[] = [];
    const owner: number[] = [];
    bands.forEach((frame, j) => {
      for (const d of frame) {
        keys.push(this.keys('liveness', 'sketch', d));
        members.push(`${sessionId}:${j}`);
        owner.push(j);
      }
    });
    const out = bands.map(() => new Map<string, number>());
    if (!keys.length) return out;
    const read = (await this.redis.eval(SKETCH_LUA, keys.length, ...keys, String(windowSeconds), String(SKETCH_BAND_MEMBERS), ...members)) as string[][];
    read.forEach((held, i) => {
      const m = out[owner[i]!]!;
      for (const frame of held) m.set(frame, (m.get(frame) ?? 0) + 1);
    });
    return out;
  }

  /**
   * Remembers the frames' digests in one step: whether any of them was received before (in any
   * session), and the ones this call added (forgotten again by `forgetFrames` for frames that do not
   * decode).
   */
  async recordFrames(digests: readonly string[], windowSeconds: number): Promise<{ seen: boolean; added: string[] }> {
    if (!digests.length) return { seen: false, added: [] };
    const keys = digests.map((d) => this.keys('liveness', 'frame', d));
    const known = (await this.redis.eval(FRAMES_LUA, keys.length, ...keys, String(windowSeconds))) as number[];
    return { seen: known.some((k) => k === 1), added: digests.filter((_, i) => known[i] === 0) };
  }

  /** Forgets digests this service added for frames that never decoded. */
  async forgetFrames(digests: readonly string[]): Promise<void> {
    if (digests.length) await this.redis.del(...digests.map((d) => this.keys('liveness', 'frame', d)));
  }
}
