/**
 * The sign-in wing's settings, composed into the configuration by its manifest: consumer one-time
 * codes (`config.otp`) and staff sign-in (`config.operators`).
 */
import { parseCountryCodes, s, type Parsed, type WingSettingGroup } from '../../platform/config.js';

export const OTP_SETTINGS = {
  ttlSeconds: s({ env: 'OTP_TTL_SECONDS', kind: 'int', default: 300, min: 10, doc: 'One-time code lifetime.' }),
  cooldownSeconds: s({ env: 'OTP_COOLDOWN_SECONDS', kind: 'int', default: 60, min: 0, doc: 'Per-phone wait between code requests (429 `otp_cooldown`).' }),
  maxAttempts: s({ env: 'OTP_MAX_ATTEMPTS', kind: 'int', default: 5, min: 1, doc: 'Wrong codes before the code dies (429 `otp_too_many_attempts`).' }),
  requestsPerIpPerHour: s({
    env: 'OTP_REQUESTS_PER_IP_PER_HOUR',
    kind: 'int',
    default: 20,
    min: 1,
    doc: 'Per-IP hourly cap on code requests (SMS pumping).',
  }),
  requestsPerPhonePerDay: s({
    env: 'OTP_REQUESTS_PER_PHONE_PER_DAY',
    kind: 'int',
    default: 10,
    min: 1,
    doc: 'Codes one phone number may be sent per 24 h (429 `rate_limited`): bounds guessing against one number to this × OTP_MAX_ATTEMPTS per day.',
  }),
  verifyFailuresPerIpPerHour: s({
    env: 'OTP_VERIFY_FAILURES_PER_IP_PER_HOUR',
    kind: 'int',
    default: 30,
    min: 1,
    doc: 'Refused codes (`POST /auth/otp/verify`) one client address may have in an hour, whatever the numbers; then 429 `rate_limited` with Retry-After. Such refusals, and a code for a number with no code pending, write no AuditEvent, so anonymous guessing cannot flood the audit trail.',
  }),
  allowedCountryCodes: s({
    env: 'OTP_ALLOWED_COUNTRY_CODES',
    kind: 'string',
    default: '234',
    doc: 'Country calling codes (comma-separated digits, e.g. `234,233`) whose mobile numbers may receive SMS: `POST /auth/otp/request` and a phone change (`PATCH /users/{id}`) to a number outside them answer 400 `phone_not_supported`, and phone-change notices go only to such numbers. SMS pumping (toll fraud through premium international routes) is the commonest abuse of code endpoints; the service is meant for Nigerian numbers.',
  }),
  secret: s({
    env: 'OTP_SECRET',
    kind: 'string',
    default: '',
    secret: true,
    doc: 'Secret (at least 32 characters) keying the HMAC of consumer one-time codes, apart from the signing key so that rotating JWT_PRIVATE_KEY leaves pending codes valid. Empty: derived from JWT_PRIVATE_KEY (a rotation then voids pending codes).',
  }),
} as const;

export const OPERATOR_SETTINGS = {
  maxFailedLogins: s({ env: 'OPERATOR_MAX_FAILED_LOGINS', kind: 'int', default: 5, min: 1, doc: 'Failed logins in a row before an operator is locked.' }),
  loginsPerIpPerHour: s({
    env: 'OPERATOR_LOGINS_PER_IP_PER_HOUR',
    kind: 'int',
    default: 30,
    min: 1,
    doc: "Operator sign-in attempts per client address AND identifier per hour (429 `rate_limited`), checked before any password hashing: guessing one account from an office's address does not block the other operators behind it.",
  }),
  loginFailuresPerIpPerHour: s({
    env: 'OPERATOR_LOGIN_FAILURES_PER_IP_PER_HOUR',
    kind: 'int',
    default: 100,
    min: 1,
    doc: 'Failed operator sign-ins per client address per hour, whatever the identifier (password spraying), beyond which that address gets 429 `rate_limited`; successes never count.',
  }),
  adminLockSeconds: s({
    env: 'ADMIN_LOCK_SECONDS',
    kind: 'int',
    default: 900,
    min: 0,
    doc: "An administrator's first lock after OPERATOR_MAX_FAILED_LOGINS failed sign-ins (a wrong password or a wrong `otp`) lasts this long, each further lock twice as long up to 24 h, so nobody can lock the organisation out of its last administrator; the failure count runs on across the locks (only a successful sign-in clears it) up to STAFF_MAX_FAILURES. 0: an administrator's lock lasts until a reset or `npm run unlock-operator`, like an operator's.",
  }),
  staffDeviceTtlDays: s({
    env: 'STAFF_DEVICE_TTL_DAYS',
    kind: 'int',
    default: 180,
    min: 1,
    doc: 'How long the `deviceToken` of a successful staff sign-in is valid. A sign-in that presents a valid one of the account is judged by that device\'s own failure count (OPERATOR_MAX_FAILED_LOGINS lock the device, not the account), so wrong passwords from elsewhere never lock out the account\'s known devices (docs/security.md "Staff devices").',
  }),
  staffMaxFailures: s({
    env: 'STAFF_MAX_FAILURES',
    kind: 'int',
    default: 20,
    min: 1,
    doc: "Consecutive failed sign-ins after which an administrator's account stays locked (403 `account_locked`) until another administrator's reset-password or reset-mfa, or `npm run unlock-operator`: with the lapsing locks before it, a guessed password's second factor gets at most this many tries (NIST SP 800-63B allows 100).",
  }),
  staffMfa: s({
    env: 'STAFF_MFA',
    kind: 'string',
    default: (c: Parsed) => (c.runtime?.nodeEnv === 'production' ? 'required' : 'optional'),
    enum: ['required', 'optional'] as const,
    doc: 'Staff second factor (TOTP). `required`: an operator without one signs in with `mfaSetupRequired: true` and gets 403 `mfa_setup_required` on every route but set-password, mfa/setup and mfa/confirm. `optional`: operators may enable it.',
  }),
  staffSessionMaxSeconds: s({
    env: 'STAFF_SESSION_MAX_SECONDS',
    kind: 'int',
    default: 43_200,
    min: 1,
    doc: 'Absolute lifetime of a staff session from its sign-in; past it /auth/refresh answers 401 `invalid_refresh_token`.',
  }),
  staffSessionIdleSeconds: s({
    env: 'STAFF_SESSION_IDLE_SECONDS',
    kind: 'int',
    default: 1800,
    min: 1,
    doc: 'Idle limit of a staff session: a refresh token not used within this long answers 401 `invalid_refresh_token`.',
  }),
  tempPasswordTtlSeconds: s({
    env: 'TEMP_PASSWORD_TTL_SECONDS',
    kind: 'int',
    default: 86_400,
    min: 1,
    doc: 'A temporary password (new operator, reset) not replaced within this long answers 403 `temporary_password_expired` at login; an administrator issues a new one.',
  }),
  adminIdentifier: s({
    env: 'ADMIN_IDENTIFIER',
    kind: 'string',
    default: '',
    // Not a password, but half of a sign-in, and what a lock-out needs: never in a log.
    secret: true,
    doc: 'First administrator, created at start-up when no administrator exists.',
  }),
  adminPassword: s({ env: 'ADMIN_PASSWORD', kind: 'string', default: '', secret: true, doc: 'Password of that first administrator.' }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    otp: typeof OTP_SETTINGS;
    operators: typeof OPERATOR_SETTINGS;
  }
}

export const signInSettingGroups: Record<string, WingSettingGroup> = {
  otp: {
    title: 'One-time codes',
    settings: OTP_SETTINGS,
    check({ isProduction, otp }, problems) {
      if (isProduction) {
        if (otp.secret && String(otp.secret).length < 32) problems.push('OTP_SECRET must have at least 32 characters');
        if (!otp.secret)
          problems.push('OTP_SECRET must be set in production (at least 32 characters): without it the one-time codes would be keyed from the signing key');
      }
      if (parseCountryCodes(String(otp.allowedCountryCodes)) === undefined)
        problems.push('OTP_ALLOWED_COUNTRY_CODES must be comma-separated country calling codes (1 to 3 digits each), at least one');
    },
  },
  operators: {
    title: 'Operators and administrators',
    settings: OPERATOR_SETTINGS,
    check({ isProduction, operators }, problems) {
      if (isProduction && operators.adminPassword && String(operators.adminPassword).length < 12)
        problems.push('ADMIN_PASSWORD must have at least 12 characters in production');
      if ((operators.adminIdentifier === '') !== (operators.adminPassword === ''))
        problems.push('ADMIN_IDENTIFIER and ADMIN_PASSWORD are set together or not at all');
    },
  },
};
