/**
 * TOTP (RFC 6238: HMAC-SHA1, 6 digits, 30 s steps) through the `otpauth` library (docs/dependencies.md).
 * A code is accepted in its own step or one step either side (clock drift); which step matched is
 * returned, so the caller can refuse a code of a step already used (no replay within the window).
 */
import { Secret, TOTP } from 'otpauth';

export const TOTP_DIGITS = 6;
export const TOTP_PERIOD_SECONDS = 30;
const DRIFT_STEPS = 1;
const ISSUER = 'faceid';

const totpOf = (secretBase32: string, label = 'operator') =>
  new TOTP({ issuer: ISSUER, label, algorithm: 'SHA1', digits: TOTP_DIGITS, period: TOTP_PERIOD_SECONDS, secret: Secret.fromBase32(secretBase32) });

/** A new secret: 160 random bits (RFC 4226's recommended length), base32. */
export const newTotpSecret = (): string => new Secret({ size: 20 }).base32;

/** The `otpauth://totp/...` URI an authenticator app reads (shown as a QR code). */
export const totpUri = (secretBase32: string, account: string): string => totpOf(secretBase32, account).toString();

/** The step a code belongs to when it is right (within the drift window), else null. */
export function matchingStep(secretBase32: string, code: string, nowMs = Date.now()): number | null {
  if (!/^[0-9]{6}$/.test(code)) return null;
  const delta = totpOf(secretBase32).validate({ token: code, timestamp: nowMs, window: DRIFT_STEPS });
  return delta === null ? null : Math.floor(nowMs / 1000 / TOTP_PERIOD_SECONDS) + delta;
}

/** The code of a step (tests and the console's own checks compute codes the way an app does). */
export const codeAt = (secretBase32: string, nowMs = Date.now()): string => totpOf(secretBase32).generate({ timestamp: nowMs });
