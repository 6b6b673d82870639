/**
 * Consumer sign-in by one-time code (OTP).
 *
 * - A request normalises the phone, applies the per-IP hourly cap (SMS pumping) and the per-phone
 *   cooldown, stores a fresh 6-digit code from the CSPRNG and hands it to the SMS transport. The
 *   answer never depends on whether the number has an account (the users table is not even read).
 * - Codes live only in Redis, as HMAC-SHA256(secret, phone:code) with their TTL, under a key derived
 *   from the phone's HMAC (no phone number appears in a key). The secret is OTP_SECRET, or, when that
 *   is unset, derived from the JWT signing key (TokenService.otpSecret).
 * - Verification is one Lua script: a correct code is deleted in the same step that recognises it,
 *   so of any number of concurrent submissions exactly one succeeds. Wrong codes count; the
 *   OTP_MAX_ATTEMPTS-th wrong code kills the code, and every later submission is refused with 429
 *   until a new code is requested.
 */
import { createHmac, randomInt } from 'node:crypto';
import { isIPv6 } from 'node:net';
import type { Config } from '../../shared/config.js';
import { AppError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import type { KeySpace, Redis } from '../../shared/redis.js';
import type { UsersRepository } from '../../shared/repositories/users.js';
import type { Metrics } from '../metrics.js';
import { requirePhone } from './phone.js';
import type { SessionService, TokenPair } from './session-service.js';
import { SmsDeliveryError, type SmsTransport } from './sms.js';
import type { TokenService } from './token-service.js';

export interface OtpDeps {
  config: Pick<Config, 'otpTtlSeconds' | 'otpCooldownSeconds' | 'otpMaxAttempts' | 'otpRequestsPerIpPerHour' | 'otpRequestsPerPhonePerDay'>;
  users: UsersRepository;
  redis: Redis;
  keys: KeySpace;
  tokens: TokenService;
  sessions: SessionService;
  sms: SmsTransport;
  metrics?: Metrics;
  logger?: Logger;
}

const IP_WINDOW_SECONDS = 3600;

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
 * KEYS: 1 the phone's code. ARGV: 1 submitted digest, 2 max wrong attempts, 3 how long a dead code
 * keeps answering 429 (s). Returns 'ok' (consumed), 'wrong', 'killed' (this wrong code was the last),
 * 'dead' (killed earlier) or 'missing' (never requested, expired or already used).
 */
const VERIFY_SCRIPT = `
local h = redis.call('HGET', KEYS[1], 'h')
if not h then return 'missing' end
if h == 'dead' then return 'dead' end
if h == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 'ok'
end
local n = redis.call('HINCRBY', KEYS[1], 'a', 1)
if n >= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'h', 'dead')
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  return 'killed'
end
return 'wrong'
`;

export class OtpService {
  private readonly secret: Buffer;

  constructor(private readonly deps: OtpDeps) {
    this.secret = deps.tokens.otpSecret();
  }

  private mac(...parts: string[]): string {
    return createHmac('sha256', this.secret).update(parts.join('\u0000')).digest('base64url');
  }

  private phoneKeys(phone: string) {
    const id = this.mac('phone', phone).slice(0, 32);
    return { code: this.deps.keys('otp', 'code', id), cooldown: this.deps.keys('otp', 'cooldown', id), daily: this.deps.keys('otp', 'daily', id) };
  }

  private digest(phone: string, code: string): string {
    return this.mac('code', phone, code);
  }

  /** POST /auth/otp/request. Resolves when the code is handed to the SMS transport. */
  async request(rawPhone: string, ip: string): Promise<{ status: 'sent' }> {
    const { config, redis, keys, sms, metrics } = this.deps;
    const phone = requirePhone(rawPhone);
    const k = this.phoneKeys(phone);
    const ipKey = keys('otp', 'ip', ipBucket(ip));
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');

    const [outcome, seconds] = (await redis.eval(
      REQUEST_SCRIPT, 4, ipKey, k.cooldown, k.code, k.daily,
      config.otpRequestsPerIpPerHour, IP_WINDOW_SECONDS, config.otpCooldownSeconds, this.digest(phone, code), config.otpTtlSeconds,
      config.otpRequestsPerPhonePerDay,
    )) as [string, number];

    if (outcome === 'rate_limited') {
      metrics?.outcome('otp_request', 'rate_limited');
      throw new AppError('rate_limited', 'Too many code requests from this address; try again later', { retryAfter: Math.max(1, Number(seconds)) });
    }
    if (outcome === 'phone_limited') {
      metrics?.outcome('otp_request', 'phone_limited');
      throw new AppError('rate_limited', 'Too many codes for this number today; try again later', { retryAfter: Math.max(1, Number(seconds)) });
    }
    if (outcome === 'cooldown') {
      metrics?.outcome('otp_request', 'cooldown');
      throw new AppError('otp_cooldown', 'A code was sent recently; wait before asking for another', { retryAfter: Math.max(1, Number(seconds)) });
    }

    try {
      await sms.sendCode(phone, code);
    } catch (e) {
      // Nothing was delivered: withdraw the code and the cooldown so that the user can retry at once.
      await redis.del(k.code, k.cooldown).catch(() => undefined);
      metrics?.outcome('otp_request', 'delivery_failed');
      this.deps.logger?.error({ transport: sms.name, reason: e instanceof SmsDeliveryError ? e.reason : 'error' }, 'SMS delivery failed');
      throw new AppError('dependency_unavailable', 'The code could not be sent; try again shortly');
    }
    metrics?.outcome('otp_request', 'sent');
    return { status: 'sent' };
  }

  /**
   * POST /auth/otp/verify: consumes a correct code, creates the user on the first success, opens a
   * session. Wrong: 400 `otp_invalid`; the last allowed wrong code and everything after: 429.
   */
  async verify(rawPhone: string, code: string, opts: { deviceHint?: string | null } = {}): Promise<TokenPair & { userId: string }> {
    const { config, redis, metrics } = this.deps;
    const phone = requirePhone(rawPhone);
    const k = this.phoneKeys(phone);
    const outcome = (await redis.eval(VERIFY_SCRIPT, 1, k.code, this.digest(phone, code), config.otpMaxAttempts, config.otpTtlSeconds)) as string;

    if (outcome === 'killed' || outcome === 'dead') {
      metrics?.outcome('otp_verify', 'too_many_attempts');
      const wait = await redis.ttl(k.cooldown);
      throw new AppError('otp_too_many_attempts', 'Too many wrong codes: request a new code', { retryAfter: Math.max(1, wait) });
    }
    if (outcome !== 'ok') {
      metrics?.outcome('otp_verify', 'invalid');
      throw new AppError('otp_invalid', 'The code is wrong or has expired');
    }

    const userId = await this.deps.users.findOrCreateByPhone(phone);
    const { pair } = await this.deps.sessions.open({ type: 'consumer', id: userId }, { deviceHint: opts.deviceHint });
    metrics?.outcome('otp_verify', 'ok');
    return { ...pair, userId };
  }
}

/**
 * What the per-IP cap counts: an IPv4 address (also when IPv4-mapped), or an IPv6 address's /64
 * prefix, since one subscriber usually holds a whole /64 and could otherwise rotate addresses freely.
 */
export function ipBucket(ip: string): string {
  const bare = ip.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare);
  if (mapped) return mapped[1]!;
  if (!isIPv6(bare) || bare.includes('.')) return bare;
  const [head = '', tail] = bare.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return `${groups.slice(0, 4).map((g) => g.toLowerCase().padStart(4, '0')).join(':')}::/64`;
}
