/**
 * Sign-in and the token lifecycle: consumer OTP, operator login and set-password, refresh, logout.
 * The logic lives in api/services/{otp-service,operator-auth-service,session-service}.ts.
 */
import { Type } from '@sinclair/typebox';
import { NO_STORE, route, type AnyRoute } from '../../platform/http/route-table.js';
import { StatusBody, Strict, Uuid } from '../../platform/http/schemas.js';
import type { MfaService } from './mfa-service.js';
import type { OperatorAuthService } from './operator-auth-service.js';
import type { OtpService } from './otp-service.js';
import type { SessionService } from './session-service.js';
import type { Config } from '../../platform/config.js';

const Phone = Type.String({
  minLength: 1,
  maxLength: 32,
  description: 'E.164 (`+2348031234567`) or a Nigerian local form (`08031234567`), normalised to E.164',
});
const RefreshToken = Type.String({ minLength: 1, maxLength: 512, description: 'The opaque refresh token of a token pair' });

const CurrentPassword = Type.String({ minLength: 1, maxLength: 1024, description: "The operator's current password" });

/** The HttpOnly cookie that keeps a browser's staff `deviceToken` (sent only to the sign-in route). */
const DEVICE_COOKIE = 'faceid_staff_device';

/** Token-bearing answers must not be stored by any cache (RFC 6749 section 5.1). */
const TokenPairFields = {
  accessToken: Type.String({ description: 'JWT (EdDSA) to send as `Authorization: Bearer <token>`' }),
  refreshToken: Type.String({ description: 'Opaque, single-use: each /auth/refresh consumes it and returns a new one' }),
  tokenType: Type.Literal('Bearer'),
  expiresIn: Type.Integer({ description: 'Access token lifetime in seconds' }),
  refreshExpiresIn: Type.Integer({ description: 'Refresh token lifetime in seconds' }),
};
const ConsumerTokenPair = Type.Object({ ...TokenPairFields, userId: Uuid });
const OperatorTokenPair = Type.Object({
  ...TokenPairFields,
  operatorId: Uuid,
  mustResetPassword: Type.Boolean({ description: 'When true, every operator route but set-password answers 403 `password_reset_required`' }),
  mfaSetupRequired: Type.Optional(
    Type.Literal(true, {
      description:
        'STAFF_MFA=required and no second factor yet: every operator route but set-password, mfa/setup and mfa/confirm answers 403 `mfa_setup_required`',
    }),
  ),
});

export default function authRoutes({
  config,
  sessions,
  otp,
  operatorAuth,
  mfa,
}: {
  config: Config;
  sessions: SessionService;
  otp: OtpService;
  operatorAuth: OperatorAuthService;
  mfa: MfaService;
}): AnyRoute[] {
  return [
    route({
      method: 'POST',
      path: '/auth/otp/request',
      operationId: 'requestOtp',
      tag: 'Auth',
      summary: 'Send a 6-digit sign-in code by SMS',
      description:
        `Always \`{ status: "sent" }\` for a valid number, registered or not. Per phone, one request per OTP_COOLDOWN_SECONDS (${config.otp.cooldownSeconds} s; else 429 \`otp_cooldown\`); ` +
        `per client IP, OTP_REQUESTS_PER_IP_PER_HOUR (${config.otp.requestsPerIpPerHour}; else 429 \`rate_limited\`); both with Retry-After. The code lives OTP_TTL_SECONDS (${config.otp.ttlSeconds} s). ` +
        `Only mobile numbers of OTP_ALLOWED_COUNTRY_CODES (+${config.otp.allowedCountryCodes}) are sent codes; another country's number is 400 \`phone_not_supported\` (SMS pumping).`,
      auth: 'none',
      body: Type.Object({ phone: Phone }, Strict),
      responses: { 200: { description: 'Code sent', schema: StatusBody('sent') } },
      errors: ['phone_not_supported', 'otp_cooldown', 'rate_limited', 'dependency_unavailable'],
      handler: async function requestOtp({ body, ip }) {
        return { body: await otp.request(body.phone, ip) };
      },
    }),
    route({
      method: 'POST',
      path: '/auth/otp/verify',
      operationId: 'verifyOtp',
      tag: 'Auth',
      summary: 'Exchange the code for a token pair (creates the user on the first success)',
      description:
        `Single use: the first correct submission consumes the code. Wrong codes 1-${config.otp.maxAttempts - 1} answer 400 \`otp_invalid\`; ` +
        `the ${config.otp.maxAttempts}th kills the code and answers 429 \`otp_too_many_attempts\`, as does every submission after it until a new code is requested. ` +
        `One client address gets OTP_VERIFY_FAILURES_PER_IP_PER_HOUR (${config.otp.verifyFailuresPerIpPerHour}) refused codes an hour, whatever the numbers; then 429 \`rate_limited\` with Retry-After.`,
      auth: 'none',
      body: Type.Object({ phone: Phone, code: Type.String({ pattern: '^[0-9]{6}$', description: 'The 6-digit code' }) }, Strict),
      responses: { 200: { description: 'Signed in', schema: ConsumerTokenPair } },
      errors: ['otp_invalid', 'otp_too_many_attempts', 'rate_limited'],
      handler: async function verifyOtp({ body, userAgent, ip }) {
        return { body: await otp.verify(body.phone, body.code, { deviceHint: userAgent, ip }), headers: NO_STORE };
      },
    }),
    route({
      method: 'POST',
      path: '/auth/operator/login',
      operationId: 'operatorLogin',
      tag: 'Auth',
      summary: 'Operator or administrator sign-in',
      description:
        `The same 401 \`invalid_credentials\` for an unknown identifier and a wrong password, locked account or not. ${config.operators.maxFailedLogins} failures in a row lock the account ` +
        '(then the right password answers 403 `account_locked`) until an administrator resets its password (an administrator: for a doubling while, see docs/security.md). ' +
        `A sign-in with a valid \`deviceToken\` of the account (answered by every successful sign-in, valid STAFF_DEVICE_TTL_DAYS) is judged by that device's own count instead: ${config.operators.maxFailedLogins} failures lock the device, not the account, and the account's lock does not apply to it. ` +
        'With a second factor enabled, a missing or wrong `otp` (the current TOTP code, or an unused recovery code) answers 401 `mfa_required` and no token; a wrong one counts towards the lock; a TOTP code is accepted once. ' +
        `A temporary password older than TEMP_PASSWORD_TTL_SECONDS (${config.operators.tempPasswordTtlSeconds} s) answers 403 \`temporary_password_expired\`. ` +
        `Staff sessions end STAFF_SESSION_MAX_SECONDS (${config.operators.staffSessionMaxSeconds} s) after sign-in, or after STAFF_SESSION_IDLE_SECONDS (${config.operators.staffSessionIdleSeconds} s) without a refresh.`,
      auth: 'none',
      body: Type.Object(
        {
          identifier: Type.String({ minLength: 1, maxLength: 256 }),
          password: Type.String({ minLength: 1, maxLength: 1024 }),
          otp: Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: 64,
              description: 'The 6-digit code of the authenticator app, or an unused recovery code; required once a second factor is enabled',
            }),
          ),
          deviceToken: Type.Optional(
            Type.String({
              minLength: 1,
              maxLength: 128,
              description:
                "The `deviceToken` an earlier sign-in of this account answered on this device: the sign-in is then judged by the device's own failure count, and the account's lock (a stranger's doing) does not apply. A browser sends it in the `faceid_staff_device` HttpOnly cookie instead.",
            }),
          ),
        },
        Strict,
      ),
      responses: {
        200: {
          description: 'Signed in; also sets the HttpOnly cookie `faceid_staff_device` (path /auth/operator/login) holding `deviceToken`',
          schema: Type.Object({
            ...OperatorTokenPair.properties,
            deviceToken: Type.String({
              description: `Opaque; identifies this device to later sign-ins of this account for STAFF_DEVICE_TTL_DAYS (${config.operators.staffDeviceTtlDays} days). Keep it like a password.`,
            }),
          }),
        },
      },
      errors: ['invalid_credentials', 'mfa_required', 'account_locked', 'temporary_password_expired', 'operator_deactivated', 'rate_limited'],
      handler: async function operatorLogin({ body, userAgent, ip, ctx }) {
        const deviceToken = body.deviceToken ?? ctx.cookies.get(DEVICE_COOKIE) ?? undefined;
        const signedIn = await operatorAuth.login(body.identifier, body.password, { deviceHint: userAgent, ip, otp: body.otp, deviceToken });
        // The console keeps its device in an HttpOnly cookie no script can read (docs/console.md);
        // API clients keep the `deviceToken` of the body.
        ctx.cookies.set(DEVICE_COOKIE, signedIn.deviceToken, {
          httpOnly: true,
          sameSite: 'strict',
          secure: ctx.secure,
          path: '/auth/operator/login',
          maxAge: config.operators.staffDeviceTtlDays * 86_400_000,
          overwrite: true,
        });
        return { body: signedIn, headers: NO_STORE };
      },
    }),
    route({
      method: 'POST',
      path: '/auth/operator/set-password',
      operationId: 'operatorSetPassword',
      tag: 'Auth',
      summary: "Set one's own password (accepted while flagged for reset); clears the flag",
      description:
        "A wrong current password is 401 `invalid_credentials` and counts towards the lock. A common or breached new password is 400 `weak_password`. The operator's other sessions end.",
      auth: 'operator:flagged-ok',
      body: Type.Object(
        {
          currentPassword: Type.String({ minLength: 1, maxLength: 1024 }),
          newPassword: Type.String({ minLength: 8, maxLength: 256, description: 'At least 8 characters, different from the current one' }),
        },
        Strict,
      ),
      responses: { 200: { description: 'Password set', schema: StatusBody('password_set') } },
      errors: ['invalid_credentials', 'account_locked', 'weak_password'],
      handler: async function operatorSetPassword({ body, auth }) {
        return { body: await operatorAuth.setPassword(auth.operatorId, auth.sessionId, body.currentPassword, body.newPassword) };
      },
    }),
    route({
      method: 'POST',
      path: '/auth/operator/mfa/setup',
      operationId: 'operatorMfaSetup',
      tag: 'Auth',
      summary: 'Start setting up a TOTP second factor (RFC 6238, 6 digits, 30 s)',
      description:
        'Answers a new secret (base32) and its `otpauth://` URI for an authenticator app (the console shows it as a QR code). It is stored encrypted and pending until ' +
        "/auth/operator/mfa/confirm; a new setup replaces a pending one. 409 `conflict` when a second factor is enabled already (an administrator's reset-mfa clears it). " +
        'The current `password` is required: a wrong one is 401 `invalid_credentials` and counts toward the lock (a stolen session alone cannot enrol an authenticator).',
      auth: 'operator:mfa-setup',
      body: Type.Object({ password: CurrentPassword }, Strict),
      responses: {
        200: {
          description: 'The secret, once',
          schema: Type.Object({ secret: Type.String({ description: 'Base32' }), otpauthUri: Type.String({ description: '`otpauth://totp/...`' }) }),
        },
      },
      errors: ['conflict', 'invalid_credentials', 'account_locked'],
      handler: async function operatorMfaSetup({ auth, body }) {
        await operatorAuth.confirmPassword(auth.operatorId, auth.sessionId, body.password);
        return { headers: NO_STORE, body: await mfa.setup(auth.operatorId) };
      },
    }),
    route({
      method: 'POST',
      path: '/auth/operator/mfa/confirm',
      operationId: 'operatorMfaConfirm',
      tag: 'Auth',
      summary: 'Confirm the second factor with its first code; answers 10 single-use recovery codes, once',
      description:
        'A wrong code is 400 `otp_invalid`; 409 `conflict` without a pending setup. From now on sign-in needs `otp`. The recovery codes are stored hashed and each works once. ' +
        'The current `password` is required: a wrong one is 401 `invalid_credentials` and counts toward the lock.',
      auth: 'operator:mfa-setup',
      body: Type.Object(
        { code: Type.String({ pattern: '^[0-9]{6}$', description: 'The current 6-digit code of the authenticator app' }), password: CurrentPassword },
        Strict,
      ),
      responses: {
        200: {
          description: 'Enabled',
          schema: Type.Object({
            status: Type.Literal('mfa_enabled'),
            recoveryCodes: Type.Array(Type.String(), { minItems: 10, maxItems: 10, description: 'Single-use; shown only now' }),
          }),
        },
      },
      errors: ['otp_invalid', 'conflict', 'invalid_credentials', 'account_locked'],
      handler: async function operatorMfaConfirm({ body, auth }) {
        await operatorAuth.confirmPassword(auth.operatorId, auth.sessionId, body.password);
        return { headers: NO_STORE, body: await mfa.confirm(auth.operatorId, body.code) };
      },
    }),
    route({
      method: 'POST',
      path: '/auth/refresh',
      operationId: 'refreshTokens',
      tag: 'Auth',
      summary: 'Rotate a refresh token into a new token pair (no bearer token needed)',
      description:
        'The presented refresh token is consumed. Presenting a consumed token again revokes its whole session: every refresh and access token of it stops working. ' +
        "A deleted user's session is refused (401); a deactivated operator's is refused with 403 `operator_deactivated`.",
      auth: 'none',
      body: Type.Object({ refreshToken: RefreshToken }, Strict),
      responses: {
        200: {
          description: 'A new pair; consumers get `userId`, operators `operatorId` and `mustResetPassword`',
          schema: Type.Union([ConsumerTokenPair, OperatorTokenPair]),
        },
      },
      errors: ['invalid_refresh_token', 'operator_deactivated'],
      handler: async function refreshTokens({ body }) {
        const { pair, subject } = await sessions.refresh(body.refreshToken);
        return {
          headers: NO_STORE,
          body:
            subject.type === 'consumer'
              ? { ...pair, userId: subject.userId }
              : { ...pair, operatorId: subject.operatorId, mustResetPassword: subject.mustResetPassword },
        };
      },
    }),
    route({
      method: 'POST',
      path: '/auth/logout',
      operationId: 'logout',
      tag: 'Auth',
      summary: 'End the session of a refresh token (no bearer token needed)',
      description: 'Its access tokens are refused from the next request on, not at their expiry.',
      auth: 'none',
      body: Type.Object({ refreshToken: RefreshToken }, Strict),
      responses: { 204: { description: 'Session ended' } },
      errors: ['invalid_refresh_token'],
      handler: async function logout({ body }) {
        await sessions.logout(body.refreshToken);
        return { status: 204 };
      },
    }),
  ];
}
