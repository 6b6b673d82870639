/**
 * Consumer sign-in by one-time code (OTP).
 *
 * - A request normalises the phone, applies the per-IP hourly cap (SMS pumping) and the per-phone
 *   cooldown, stores a fresh 6-digit code from the CSPRNG and hands it to the SMS transport. The
 *   answer never depends on whether the number has an account (the users table is not even read).
 * - Codes live only in Redis (features/sign-in/otp-codes.ts), as HMAC-SHA256(secret, phone:code) with
 *   their TTL, under a key derived from the phone's HMAC (no phone number appears in a key). The
 *   secret is OTP_SECRET, or, when that is unset, derived from the JWT signing key (TokenService.otpSecret).
 * - Verification is one Lua script: a correct code is deleted in the same step that recognises it,
 *   so of any number of concurrent submissions exactly one succeeds. Wrong codes count; the
 *   OTP_MAX_ATTEMPTS-th wrong code kills the code, and every later submission is refused with 429
 *   until a new code is requested.
 */
import { createHmac, randomInt } from 'node:crypto';
import { parseCountryCodes, type Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import type { UsersRepository } from '../users/index.js';
import type { OtpCodeStore } from './otp-codes.js';
import type { Metrics } from '../../platform/metrics.js';
import { requirePhone, requireSmsCountry, smsAllowedTo } from '../../platform/phone.js';
import type { SessionService, TokenPair } from './session-service.js';
import { SmsDeliveryError, type SmsTransport } from '../../platform/sms.js';
import { ipBucket } from '../../platform/http/client-address.js';
import type { TokenService } from './token-service.js';
import type { AuditEventsRepository } from '../../platform/events/audit.js';

export interface OtpDeps {
  config: Pick<Config, 'otp'>;
  auditEvents: AuditEventsRepository;
  users: UsersRepository;
  codes: OtpCodeStore;
  tokens: TokenService;
  sessions: SessionService;
  sms: SmsTransport;
  metrics?: Metrics;
  logger?: Logger;
}

export class OtpService {
  private readonly secret: Buffer;
  /** OTP_ALLOWED_COUNTRY_CODES: no code goes to a number of another country (SMS pumping). */
  private readonly smsCountries: readonly string[];

  constructor(private readonly deps: OtpDeps) {
    this.secret = deps.tokens.otpSecret();
    this.smsCountries = parseCountryCodes(String(deps.config.otp.allowedCountryCodes)) ?? ['234'];
  }

  private mac(...parts: string[]): string {
    return createHmac('sha256', this.secret).update(parts.join('\u0000')).digest('base64url');
  }

  /** The phone as the code store knows it: an HMAC, so that no phone number appears in a key. */
  private phoneId(phone: string): string {
    return this.mac('phone', phone).slice(0, 32);
  }

  private digest(phone: string, code: string): string {
    return this.mac('code', phone, code);
  }

  /** An erasure: the phone's pending code and cooldown leave Redis (its daily counter stays, see OtpCodeStore.purgePhone). */
  async forgetPhone(phone: string): Promise<void> {
    await this.deps.codes.purgePhone(this.phoneId(phone));
  }

  /** POST /auth/otp/request. Resolves when the code is handed to the SMS transport. */
  async request(rawPhone: string, ip: string): Promise<{ status: 'sent' }> {
    const { config, codes, sms, metrics } = this.deps;
    const phone = requirePhone(rawPhone);
    if (!smsAllowedTo(phone, this.smsCountries)) {
      metrics?.outcome('otp_request', 'phone_not_supported');
      requireSmsCountry(phone, this.smsCountries);
    }
    const phoneId = this.phoneId(phone);
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');

    const { outcome, seconds } = await codes.issue(phoneId, ipBucket(ip), this.digest(phone, code), {
      perIpPerHour: config.otp.requestsPerIpPerHour,
      cooldownSeconds: config.otp.cooldownSeconds,
      ttlSeconds: config.otp.ttlSeconds,
      perPhonePerDay: config.otp.requestsPerPhonePerDay,
    });

    if (outcome === 'rate_limited') {
      metrics?.outcome('otp_request', 'rate_limited');
      throw new AppError('rate_limited', 'Too many code requests from this address; try again later', { retryAfter: Math.max(1, seconds) });
    }
    if (outcome === 'phone_limited') {
      metrics?.outcome('otp_request', 'phone_limited');
      throw new AppError('rate_limited', 'Too many codes for this number today; try again later', { retryAfter: Math.max(1, seconds) });
    }
    if (outcome === 'cooldown') {
      metrics?.outcome('otp_request', 'cooldown');
      throw new AppError('otp_cooldown', 'A code was sent recently; wait before asking for another', { retryAfter: Math.max(1, seconds) });
    }

    try {
      await sms.sendCode(phone, code);
    } catch (e) {
      // Nothing was delivered: withdraw the code and the cooldown so that the user can retry at once.
      await codes.withdraw(phoneId).catch(() => undefined);
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
  async verify(rawPhone: string, code: string, opts: { deviceHint?: string | null; ip?: string } = {}): Promise<TokenPair & { userId: string }> {
    const { config, codes, metrics } = this.deps;
    const phone = requirePhone(rawPhone);
    const phoneId = this.phoneId(phone);
    const { outcome, seconds } = await codes.check(phoneId, ipBucket(opts.ip ?? 'unknown'), this.digest(phone, code), {
      maxAttempts: config.otp.maxAttempts,
      deadSeconds: config.otp.ttlSeconds,
      refusalsPerIpPerHour: config.otp.verifyFailuresPerIpPerHour,
    });

    if (outcome === 'ip_limited') {
      metrics?.outcome('otp_verify', 'rate_limited');
      throw new AppError('rate_limited', 'Too many refused codes from this address; try again later', { retryAfter: Math.max(1, seconds) });
    }

    if (outcome === 'killed' || outcome === 'dead') {
      metrics?.outcome('otp_verify', 'too_many_attempts');
      const wait = await codes.cooldownLeft(phoneId);
      await this.signInFailed(phone, phoneId, 'otp_too_many_attempts');
      throw new AppError('otp_too_many_attempts', 'Too many wrong codes: request a new code', { retryAfter: Math.max(1, wait) });
    }
    if (outcome === 'missing') {
      // No code pending for this number: nobody's sign-in was attempted, so nothing to audit.
      metrics?.outcome('otp_verify', 'no_code');
      throw new AppError('otp_invalid', 'The code is wrong or has expired');
    }
    if (outcome !== 'ok') {
      metrics?.outcome('otp_verify', 'invalid');
      await this.signInFailed(phone, phoneId, 'otp_invalid');
      throw new AppError('otp_invalid', 'The code is wrong or has expired');
    }

    const userId = await this.deps.users.findOrCreateByPhone(phone);
    const { pair } = await this.deps.sessions.open({ type: 'consumer', id: userId }, { deviceHint: opts.deviceHint });
    metrics?.outcome('otp_verify', 'ok');
    return { ...pair, userId };
  }

  /**
   * Audits a refused code (`auth.sign_in_failed`). The subject is the account holding the number, or,
   * when none does, the number's keyed digest (`phone_key`): never the number itself.
   */
  private async signInFailed(phone: string, phoneId: string, reason: 'otp_invalid' | 'otp_too_many_attempts'): Promise<void> {
    try {
      const userId = await this.deps.users.liveIdByPhone(phone);
      await this.deps.auditEvents.record({
        type: 'auth.sign_in_failed',
        actorType: 'anonymous',
        actorId: null,
        subjectType: userId ? 'user' : 'phone_key',
        subjectId: userId ?? phoneId,
        data: { method: 'otp', reason },
      });
    } catch (e) {
      // The refusal stands: a failed audit write must not turn a 400 into a 500.
      this.deps.logger?.warn({ err: (e as Error).message, reason }, 'refused code not audited');
    }
  }
}
