/**
 * Staff recovery codes: 10 single-use codes shown once at MFA confirmation. Each holds 80 random bits
 * (16 base32 characters, grouped `xxxx-xxxx-xxxx-xxxx` for reading aloud), so a SHA-256 of its
 * normalised form is enough at rest (nobody can enumerate 2^80 codes against a hash).
 */
import { createHash, randomBytes } from 'node:crypto';

export const RECOVERY_CODE_COUNT = 10;
const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

export function newRecoveryCode(): string {
  const bytes = randomBytes(10);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out.match(/.{4}/g)!.join('-');
}

/** Case, spaces and dashes do not matter when a code is typed back. */
export const normaliseRecoveryCode = (code: string) => code.toLowerCase().replace(/[\s-]/g, '');

export const hashRecoveryCode = (code: string) => createHash('sha256').update(normaliseRecoveryCode(code)).digest('hex');

/** A recovery code's shape (after normalisation): what the login tells apart from a 6-digit TOTP code. */
export const looksLikeRecoveryCode = (code: string) => /^[a-z2-7]{16}$/.test(normaliseRecoveryCode(code));
