/**
 * Biometric attempts of one user (NIST SP 800-63B 5.2.3), in Redis under the deployment prefix:
 * - `biometric:attempts:<userId>`: a hash { failures, lockedUntil } — consecutive failed comparisons and
 *   the end of the current lock (ms since the epoch, Redis's own clock). Remembered for the longest lock
 *   after the last failure; a match deletes it.
 * - `biometric:in-flight:<userId>`: the one face request of this user being served (a random owner
 *   token, expiring after the request's face-job budget even if its process dies), claimed in one
 *   script with the lock check (`reserve`).
 *
 * Counting a failure and setting the lock it earns are one Lua script, so parallel failures each count
 * and the lock they earn is never lost between two commands. The lock rule lives here, beside the count:
 * the failure that reaches the limit locks for the base time, every further failure doubles it, up to
 * the cap.
 */
import { randomBytes } from 'node:crypto';
import type { KeySpace, Redis } from '../../platform/redis/redis.js';

export interface BiometricLockPolicy {
  maxFailures: number;
  lockSeconds: number;
  maxLockSeconds: number;
}

export interface FailureRecorded {
  /** Consecutive failures, this one included. */
  failures: number;
  /** The lock this failure set (0: none). */
  lockSeconds: number;
}

// KEYS[1] = attempts hash; ARGV = max failures, base lock ms, max lock ms.
// Returns { failures, lock ms set by this failure (0: none) }.
const FAIL_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local maxFailures = tonumber(ARGV[1])
local cap = tonumber(ARGV[3])
local lockMs = 0
if n >= maxFailures then
  lockMs = tonumber(ARGV[2]) * math.pow(2, math.min(n - maxFailures, 40))
  if lockMs > cap then lockMs = cap end
  lockMs = math.floor(lockMs)
  local untilMs = now + lockMs
  local current = tonumber(redis.call('HGET', KEYS[1], 'lockedUntil') or '0')
  if untilMs > current then redis.call('HSET', KEYS[1], 'lockedUntil', string.format('%d', untilMs)) end
end
redis.call('PEXPIRE', KEYS[1], lockMs + cap)
return { n, lockMs }`;

// KEYS[1] = attempts hash, KEYS[2] = in-flight key; ARGV[1] = owner token, ARGV[2] = lease ms.
// Returns { 'locked', ms left } while the user is locked, else claims the user's one in-flight request:
// { 'claimed', 0 }, or { 'busy', 0 } when another request holds it. One script, so no comparison
// starts between another request's lock and this check.
const RESERVE_LUA = `
local u = redis.call('HGET', KEYS[1], 'lockedUntil')
if u then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local left = tonumber(u) - now
  if left > 0 then return { 'locked', left } end
end
if redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2], 'NX') then return { 'claimed', 0 } end
return { 'busy', 0 }`;

// KEYS[1] = in-flight key; ARGV[1] = owner token. Deletes the key only if this owner still holds it.
const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

// KEYS[1] = in-flight key; ARGV[1] = owner token, ARGV[2] = ms. Extends the claim only if this owner still holds it.
const RENEW_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

export class BiometricAttemptsStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
    private readonly policy: BiometricLockPolicy,
  ) {}

  private attemptsKey(userId: string): string {
    return this.keys('biometric', 'attempts', userId);
  }

  private inFlightKey(userId: string): string {
    return this.keys('biometric', 'in-flight', userId);
  }

  /** Counts one failed comparison (atomic) and locks when it reaches the limit. */
  async recordFailure(userId: string): Promise<FailureRecorded> {
    const { maxFailures, lockSeconds, maxLockSeconds } = this.policy;
    const [failures, lockMs] = (await this.redis.eval(FAIL_LUA, 1, this.attemptsKey(userId), maxFailures, lockSeconds * 1000, maxLockSeconds * 1000)) as [
      number,
      number,
    ];
    return { failures: Number(failures), lockSeconds: Math.ceil(Number(lockMs) / 1000) };
  }

  /** Consecutive failures so far (0 after a match). */
  async failures(userId: string): Promise<number> {
    return Number((await this.redis.hget(this.attemptsKey(userId), 'failures')) ?? 0);
  }

  /** A match: the count starts again. */
  async reset(userId: string): Promise<void> {
    await this.redis.del(this.attemptsKey(userId));
  }

  /** An erasure: the user's failure count and lock, and any in-flight claim, go. */
  async purgeUser(userId: string): Promise<number> {
    return this.redis.del(this.attemptsKey(userId), this.inFlightKey(userId));
  }

  /**
   * Claims the user's one in-flight face request for at most `ttlMs`; returns the owner token, or null
   * when another request of the user holds it.
   */
  async claimInFlight(userId: string, ttlMs: number): Promise<string | null> {
    const owner = randomBytes(16).toString('hex');
    const ok = await this.redis.set(this.inFlightKey(userId), owner, 'PX', Math.max(1, Math.ceil(ttlMs)), 'NX');
    return ok === 'OK' ? owner : null;
  }

  /**
   * Reserves a comparison: when the user is not locked, claims the user's one in-flight face request
   * for at most `ttlMs`, atomically with the lock check. `owner` is the claim's token (null: locked, or
   * another request of the user holds the claim); `lockLeftMs` is the lock's remaining time (0: none).
   */
  async reserve(userId: string, ttlMs: number): Promise<{ owner: string | null; lockLeftMs: number }> {
    const owner = randomBytes(16).toString('hex');
    const [state, left] = (await this.redis.eval(RESERVE_LUA, 2, this.attemptsKey(userId), this.inFlightKey(userId), owner, Math.max(1, Math.ceil(ttlMs)))) as [
      string,
      number,
    ];
    return { owner: state === 'claimed' ? owner : null, lockLeftMs: state === 'locked' ? Number(left) : 0 };
  }

  /** Extends the owner's claim to `ttlMs` from now; false when the claim is no longer this owner's. */
  async renewInFlight(userId: string, owner: string, ttlMs: number): Promise<boolean> {
    return Number(await this.redis.eval(RENEW_LUA, 1, this.inFlightKey(userId), owner, Math.max(1, Math.ceil(ttlMs)))) === 1;
  }

  async releaseInFlight(userId: string, owner: string): Promise<void> {
    await this.redis.eval(RELEASE_LUA, 1, this.inFlightKey(userId), owner);
  }
}
