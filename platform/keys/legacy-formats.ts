/**
 * What earlier versions stored, read so that an existing deployment keeps working after the upgrade;
 * nothing seals in these layouts any more, and the rotation (`npm run rotate-biometric-key`) re-seals
 * every stored value it finds in one of them into the one format (./sealed-format.ts). Each is told
 * apart by its layout:
 *
 * - ring blob v1 (binary, first byte 0x01): `0x01 | kid length | kid | iv 12 | tag 16 | ciphertext`,
 *   AES-256-GCM under the ring key itself (no purpose), the subject as associated data. Face templates,
 *   watch-list templates, dedupe case captures and the Redis values of the identity wing.
 * - TOTP secret v1 (text `v1.<iv>.<tag>.<ciphertext>`, base64url, no associated data): under
 *   MFA_ENCRYPTION_KEY, or when that was unset a key derived (HKDF) from the JWT_PRIVATE_KEY text in
 *   production, or the public development key elsewhere.
 * - webhook secret v1 (text `v1.<iv>.<tag>.<ciphertext>`, base64, the endpoint id as associated data):
 *   under a key derived (HKDF) from the signing key's DER.
 *
 * Search snapshots of the older layout are not read: a replica skips them and builds in full.
 */
import { createHash, createPrivateKey, hkdfSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { openParts, SealedFormatError } from './sealed-format.js';

export const LEGACY_RING_VERSION = 1;

/** The keys earlier versions sealed TOTP and webhook secrets under, from the settings that gave them. */
export interface LegacyKeySettings {
  /** MFA_ENCRYPTION_KEY (deprecated: read-only, see docs/data-protection.md). */
  mfaEncryptionKey?: string;
  /** JWT_PRIVATE_KEY as configured (empty: the generated development key file, if any). */
  signingKeyPem?: string;
}

/** The development signing key file earlier versions derived secrets from when JWT_PRIVATE_KEY was empty. */
const DEV_SIGNING_KEY_FILE = 'var/dev-jwt-key.pem';

export function isLegacyRingBlob(blob: Uint8Array): boolean {
  return blob.length >= 2 + 1 + 28 && blob[0] === LEGACY_RING_VERSION;
}

export function legacyRingKeyId(blob: Uint8Array): string {
  return Buffer.from(blob.buffer, blob.byteOffset + 2, blob[1]!).toString('utf8');
}

/** Opens a ring blob v1 with the ring key it names (`rootKeyFor`), the subject as associated data. */
export function openLegacyRingBlob(blob: Uint8Array, rootKeyFor: (keyId: string) => Uint8Array | undefined, subject: string): Buffer {
  if (!isLegacyRingBlob(blob)) throw new SealedFormatError('not a sealed blob');
  const kid = legacyRingKeyId(blob);
  const key = rootKeyFor(kid);
  if (!key) throw new SealedFormatError(`no key ${kid} in the ring (was it dropped before every value was re-sealed?)`);
  const b = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
  const at = 2 + b[1]!;
  return openParts(key, b.subarray(at, at + 12), b.subarray(at + 12, at + 28), b.subarray(at + 28), Buffer.from(subject, 'utf8'));
}

export const isLegacyText = (text: string): boolean => text.startsWith('v1.');

/** A legacy text value `v1.<iv>.<tag>.<data>` in `encoding`, tried under each candidate key (GCM tells the right one). */
function openLegacyText(text: string, encoding: 'base64' | 'base64url', keys: Buffer[], associatedData: Buffer | null): string {
  const [version, iv, tag, data] = text.split('.');
  if (version !== 'v1' || !iv || !tag || data === undefined) throw new SealedFormatError('not a sealed value');
  for (const key of keys) {
    try {
      return openParts(key, Buffer.from(iv, encoding), Buffer.from(tag, encoding), Buffer.from(data, encoding), associatedData).toString('utf8');
    } catch {
      // another candidate
    }
  }
  throw new SealedFormatError('legacy sealed value opens under none of the keys it may have been sealed with');
}

function signingKeyPem(settings: LegacyKeySettings): string | null {
  if (settings.signingKeyPem) return settings.signingKeyPem;
  return existsSync(DEV_SIGNING_KEY_FILE) ? readFileSync(DEV_SIGNING_KEY_FILE, 'utf8') : null;
}

/** A TOTP secret v1 (platform/keys/secret-box.ts of earlier versions). */
export function openLegacyTotpSecret(text: string, settings: LegacyKeySettings): string {
  const keys: Buffer[] = [];
  const explicit = settings.mfaEncryptionKey ?? '';
  if (explicit) keys.push(/^[0-9a-f]{64}$/i.test(explicit) ? Buffer.from(explicit, 'hex') : Buffer.from(explicit, 'base64'));
  // Derived from the configured text itself, so both spellings of the PEM are tried.
  const pem = settings.signingKeyPem ?? '';
  for (const variant of new Set([pem, pem.replace(/\\n/g, '\n'), pem.replace(/\n/g, '\\n')]))
    if (variant) keys.push(Buffer.from(hkdfSync('sha256', variant, 'faceid', 'faceid staff MFA secret box v1', 32)));
  keys.push(createHash('sha256').update('faceid development MFA key (public)').digest());
  return openLegacyText(text, 'base64url', keys, null);
}

/** A webhook secret v1 (features/webhooks/secrets.ts of earlier versions), bound to its endpoint. */
export function openLegacyWebhookSecret(text: string, endpointId: string, settings: LegacyKeySettings): string {
  const pem = signingKeyPem(settings);
  if (!pem) throw new SealedFormatError('legacy webhook secret: no signing key to derive its key from');
  const der = createPrivateKey(pem.replace(/\\n/g, '\n')).export({ type: 'pkcs8', format: 'der' });
  const key = Buffer.from(hkdfSync('sha256', der, 'faceid/derived-secret/v1', 'webhook-endpoint-secrets', 32));
  return openLegacyText(text, 'base64', [key], Buffer.from(endpointId));
}
