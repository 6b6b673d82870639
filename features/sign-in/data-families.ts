/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md):
 * - refresh-token rows, kept REFRESH_TOKEN_REUSE_GRACE_DAYS past their expiry (a rotated token
 *   presented again is still recognised as reuse); a consumer's are ended by the DELETE itself;
 * - the phone's pending sign-in code and cooldown in Redis, keyed by an HMAC of the phone. Erased at
 *   the DELETE, which still knows the phone; a retry by the sweep no longer does (the phone is
 *   erased), and the code then expires within OTP_TTL_SECONDS. The day's counter stays as the abuse
 *   cap it is.
 */
import type { Knex } from 'knex';
import type { DataFamily } from '../../platform/retention/registry.js';
import { REFRESH_TOKEN_REUSE_GRACE_DAYS, SessionsRepository } from './operators-repository.js';
import type { OtpService } from './otp-service.js';

export function signInDataFamilies(db: Knex, otp: Pick<OtpService, 'forgetPhone'>): DataFamily[] {
  const sessions = new SessionsRepository(db);
  return [
    {
      name: 'refreshTokens',
      store: 'refresh_tokens',
      retention: {
        days: REFRESH_TOKEN_REUSE_GRACE_DAYS,
        rule: `expires_at older than ${REFRESH_TOKEN_REUSE_GRACE_DAYS} days`,
        purge: (cutoff) => sessions.pruneRefreshTokensExpiredBefore(cutoff),
      },
    },
    {
      name: 'otpCodes',
      store: 'redis otp:*',
      erasure: {
        phase: 'after-commit',
        removes: "the phone's pending code and cooldown",
        erase: async ({ phone }) => {
          if (phone) await otp.forgetPhone(phone);
        },
      },
    },
  ];
}
