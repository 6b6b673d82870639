/** The sign-in wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { signInDataFamilies } from './data-families.js';
import { SIGN_IN_METRICS } from './metrics.js';
import type { OtpService } from './otp-service.js';
import { TOTP_SECRETS } from './sealed-families.js';
import { signInSettingGroups } from './settings.js';

declare module '../../platform/keys/key-ring.js' {
  interface KeyPurposes {
    'totp-secrets': true;
    'staff-device-tokens': true;
  }
}
declare module '../../platform/wing.js' {
  interface WingStores {
    /** The web process's; the sweep has none (it retries erasures without the phone, which is erased). */
    otp?: Pick<OtpService, 'forgetPhone'>;
  }
}

export const signInWing = defineWing({
  name: 'sign-in',
  routes: () => import('./routes.js').then((m) => m.default),
  settings: signInSettingGroups,
  metrics: Object.values(SIGN_IN_METRICS),
  tables: ['operators', 'sessions', 'refresh_tokens', 'operator_recovery_codes', 'operator_devices'],
  keyPurposes: {
    'totp-secrets': 'staff TOTP secrets',
    'staff-device-tokens': 'nothing sealed: the HMAC key of the stored hashes of staff device tokens',
  },
  sealedFamilies: [TOTP_SECRETS],
  dataFamilies: ({ db, stores }) => signInDataFamilies(db, stores.otp ?? { forgetPhone: async () => {} }),
});
