/**
 * The one-time codes of consumer sign-in, in Redis (the rules are OtpService's, api/services/):
 * - `otp:code:<phoneId>`: a hash { h: HMAC of the code, a: wrong attempts } with the code's TTL;
 *   `h` becomes 'dead' when the attempts ran out, and then answers 429 until a new code is requested.
 * - `otp:cooldown:<phoneId>`: the per-phone cooldown between two codes.
 * - `otp:daily:<phoneId>`: codes sent to the phone today.
 * - `otp:ip:<address bucket>`: codes requested from one client address in the current hour.
 * `phoneId` is derived from the phone by the caller's HMAC: no phone number appears in a key.
 * Issuing and checking are one Lua script each, so concurrent submissions cannot both pass.
 */
import type { KeySpace, Redis } from '../../platform/redis/redis.js';

export const IP_WINDOW_SECONDS = 3600;

/**
 * KEYS: 1 the IP counter, 2 the phone's cooldown, 3 the phone's code, 4 the phone's daily counter.
 * ARGV: 1 IP cap, 2 IP window (s), 3 cooldown (s), 4 code digest, 5 code TTL (s), 6 daily cap per phone.
 * Returns { outcome, seconds }: 'ok', 'rate_limited' (seconds left in the IP window),
 * 'phone_limited' (seconds left in the phone's day) or 'cooldown'.
 * The daily cap bounds how many codes (each with OTP_MAX_ATTEMPTS guesses) one number can be attacked with.
 */
const REQUEST_SCRIPT = `
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used >= tonumber(ARGV[1]) then
  local ttl = redis.call('TTL', KEYS[1])
  if ttl < 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]); ttl = tonumber(ARGV[2]) end
  return {'rate_limited', ttl}
end
local today = tonumber(redis.call('GET', KEYS[4]) or '0')
if today >= tonumber(ARGV[6]) then
  local ttl = redis.call('TTL', KEYS[4])
  if ttl < 0 then redis.call('EXPIRE', KEYS[4], 86400); ttl = 86400 end
  return {'phone_limited', ttl}
end
if tonumber(ARGV[3]) > 0 then
  if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ARGV[3]) then
    return {'cooldown', redis.call('TTL', KEYS[2])}
  end
end
redis.call('INCR', KEYS[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
redis.call('INCR', KEYS[4])
if redis.call('TTL', KEYS[4]) < 0 then redis.call('EXPIRE', KEYS[4], 86400) end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'h', ARGV[4], 'a', 0)
redis.call('EXPIRE', KEYS[3], ARGV[5])
return {'ok', 0}
`;

/**
 * KEYS: 1 the phone's code, 2 the address's count of refused codes. ARGV: 1 submitted digest, 2 max
 * wrong attempts, 3 how long a dead code keeps answering 429 (s), 4 refused codes allowed per address,
 * 5 that count's window (s). Returns { outcome, seconds }: 'ok' (consumed), 'wrong', 'killed' (this
 * wrong code was the last), 'dead' (killed earlier), 'missing' (never requested, expired or already
 * used) or 'ip_limited' (the address has used its refusals: nothing was looked at; seconds left).
 * Every outcome but 'ok' and 'ip_limited' counts as one refusal of the address, so one address cannot
 * spread guesses over many numbers (each number's own cap is OTP_MAX_ATTEMPTS).
 */
const VERIFY_SCRIPT = `
local refused = tonumber(redis.call('GET', KEYS[2]) or '0')
if refused >= tonumber(ARGV[4]) then
  local ttl = redis.call('TTL', KEYS[2])
  if ttl < 0 then redis.call('EXPIRE', KEYS[2], ARGV[5]); ttl = tonumber(ARGV[5]) end
  return {'ip_limited', ttl}
end
local function refuse(outcome)
  redis.call('INCR', KEYS[2])
  if redis.call('TTL', KEYS[2]) < 0 then redis.call('EXPIRE', KEYS[2], ARGV[5]) end
  return {outcome, 0}
end
local h = redis.call('HGET', KEYS[1], 'h')
if not h then return refuse('missing') end
if h == 'dead' then return refuse('dead') end
if h == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return {'ok', 0}
end
local n = redis.call('HINCRBY', KEYS[1], 'a', 1)
if n >= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'h', 'dead')
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  return refuse('killed')
end
return refuse('wrong')
`;

export type IssueOutcome = 'ok' | 'rate_limited' | 'phone_limited' | 'cooldown';
export type CheckOutcome = 'ok' | 'wrong' | 'killed' | 'dead' | 'missing' | 'ip_limited';

export interface IssueLimits {
  perIpPerHour: number;
  cooldownSeconds: number;
  ttlSeconds: number;
  perPhonePerDay: number;
}

export class OtpCodeStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
  ) {}

  private phoneKeys(phoneId: string) {
    return { code: this.keys('otp', 'code', phoneId), cooldown: this.keys('otp', 'cooldown', phoneId), daily: this.keys('otp', 'daily', phoneId) };
  }

  /** Stores a fresh code's digest unless a cap or the cooldown refuses it (`seconds`: how long the refusal lasts). */
  async issue(phoneId: string, addressBucket: string, digest: string, limits: IssueLimits): Promise<{ outcome: IssueOutcome; seconds: number }> {
    const k = this.phoneKeys(phoneId);
    const [outcome, seconds] = (await this.redis.eval(
      REQUEST_SCRIPT,
      4,
      this.keys('otp', 'ip', addressBucket),
      k.cooldown,
      k.code,
      k.daily,
      limits.perIpPerHour,
      IP_WINDOW_SECONDS,
      limits.cooldownSeconds,
      digest,
      limits.ttlSeconds,
      limits.perPhonePerDay,
    )) as [IssueOutcome, number];
    return { outcome, seconds: Number(seconds) };
  }

  /** Withdraws a code and its cooldown (it could not be delivered). */
  async withdraw(phoneId: string): Promise<void> {
    const k = this.phoneKeys(phoneId);
    await this.redis.del(k.code, k.cooldown);
  }

  /** Checks a submitted digest: a correct one is consumed in the same step; a refusal counts against the address. */
  async check(
    phoneId: string,
    addressBucket: string,
    digest: string,
    limits: { maxAttempts: number; deadSeconds: number; refusalsPerIpPerHour: number },
  ): Promise<{ outcome: CheckOutcome; seconds: number }> {
    const [outcome, seconds] = (await this.redis.eval(
      VERIFY_SCRIPT,
      2,
      this.phoneKeys(phoneId).code,
      this.keys('otp', 'verify-ip', addressBucket),
      digest,
      limits.maxAttempts,
      limits.deadSeconds,
      limits.refusalsPerIpPerHour,
      IP_WINDOW_SECONDS,
    )) as [CheckOutcome, number];
    return { outcome, seconds: Number(seconds) };
  }

  /**
   * An erasure: the phone's pending code and its cooldown go. Its daily counter stays: a count with
   * no number (the key is an HMAC), gone within 24 hours, and what caps the codes one number can be
   * sent (docs/data-protection.md).
   */
  async purgePhone(phoneId: string): Promise<number> {
    const k = this.phoneKeys(phoneId);
    return this.redis.del(k.code, k.cooldown);
  }

  /** Seconds left of the phone's cooldown. */
  cooldownLeft(phoneId: string): Promise<number> {
    return this.redis.ttl(this.phoneKeys(phoneId).cooldown);
  }
}
