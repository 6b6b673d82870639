/**
 * Secrets encrypted at rest (staff TOTP secrets): AES-256-GCM with a random 96-bit IV per value, so a
 * copy of the database alone (an insider, a backup) does not yield the second factor. Stored as
 * `v1.<iv>.<tag>.<ciphertext>` (base64url). The key comes from MFA_ENCRYPTION_KEY.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 'v1';

/**
 * The key from its setting: 32 bytes as base64 or hex. Empty: derived (HKDF-SHA256, its own label) from
 * `fallbackSecret` (production: the signing key) or, without one, the public development key.
 */
export function secretBoxKey(setting: string, fallbackSecret = ''): Buffer {
  if (!setting && fallbackSecret) return Buffer.from(hkdfSync('sha256', fallbackSecret, 'faceid', 'faceid staff MFA secret box v1', 32));
  if (!setting) return createHash('sha256').update('faceid development MFA key (public)').digest();
  const key = /^[0-9a-f]{64}$/i.test(setting) ? Buffer.from(setting, 'hex') : Buffer.from(setting, 'base64');
  if (key.length !== 32) throw new Error('MFA_ENCRYPTION_KEY must be 32 bytes (base64 or 64 hex digits)');
  return key;
}

export function seal(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), data.toString('base64url')].join('.');
}

export function open(key: Buffer, sealed: string): string {
  const [version, iv, tag, data] = sealed.split('.');
  if (version !== VERSION || !iv || !tag || data === undefined) throw new Error('not a sealed secret');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
}
