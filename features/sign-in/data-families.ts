/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md): the
 * phone's pending sign-in code and cooldown in Redis, keyed by an HMAC of the phone. Erased at the
 * DELETE, which still knows the phone; a retry by the sweep no longer does (the phone is erased), and
 * the code then expires within OTP_TTL_SECONDS. The day's counter stays as the abuse cap it is.
 */
import type { DataFamily } from '../../platform/retention/registry.js';
import type { OtpService } from './otp-service.js';

export function signInDataFamilies(otp: Pick<OtpService, 'forgetPhone'>): DataFamily[] {
  return [
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
