/**
 * The one sealed format and the one AES-256-GCM primitive of the product (README.md beside this file).
 * Nothing else in the product calls the cipher: every sealed value, whatever it protects, is
 *
 *   0x03 | key id length (1 byte) | key id (UTF-8) | nonce (12) | tag (16) | AES-256-GCM ciphertext
 *
 * under a data key the ring derives for one purpose from the ring key the blob names, with associated
 * data `purpose ‖ 0x00 ‖ subject`: a blob opens only for the purpose and the subject it was sealed for.
 * Text columns hold the same bytes as `k3.` + base64url.
 *
 * The primitive knows nothing of purposes or rings: it takes the data key and the associated data.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export const SEALED_VERSION = 3;
export const NONCE_BYTES = 12;
export const TAG_BYTES = 16;
/** The prefix of the text form (a text column: TOTP and webhook secrets). */
export const TEXT_PREFIX = 'k3.';
/** Largest header of a blob: version, key id length, key id (at most 255 bytes), nonce, tag. */
export const MAX_BLOB_OVERHEAD = 2 + 255 + NONCE_BYTES + TAG_BYTES;

export class SealedFormatError extends Error {}

/** Seals `plaintext` under `key` (32 bytes), naming `keyId`, bound to `associatedData`. */
export function sealBlob(key: Uint8Array, keyId: string, plaintext: Uint8Array, associatedData: Uint8Array): Buffer {
  const kid = Buffer.from(keyId, 'utf8');
  if (kid.length < 1 || kid.length > 255) throw new SealedFormatError('a key id has 1 to 255 bytes');
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(associatedData);
  // One concatenation (not two): a hand-off can be a frame's pixels, and each copy of it is one more
  // large buffer for the collector.
  const data = cipher.update(plaintext);
  const last = cipher.final();
  return Buffer.concat([Buffer.from([SEALED_VERSION, kid.length]), kid, nonce, cipher.getAuthTag(), data, last]);
}

/** Whether `blob` is laid out in the sealed format (its first byte and header length; not authenticated). */
export function isSealedBlob(blob: Uint8Array): boolean {
  return blob.length >= 2 && blob[0] === SEALED_VERSION && blob[1]! >= 1 && blob.length >= 2 + blob[1]! + NONCE_BYTES + TAG_BYTES;
}

/** The key id a sealed blob names (without opening it). */
export function sealedKeyId(blob: Uint8Array): string {
  if (!isSealedBlob(blob)) throw new SealedFormatError('not a sealed blob');
  return Buffer.from(blob.buffer, blob.byteOffset + 2, blob[1]!).toString('utf8');
}

/**
 * Opens a sealed blob with the data key `keyFor` gives for the key id it names. Throws
 * SealedFormatError for a blob of another layout or of a key `keyFor` does not give, and when it does
 * not authenticate (altered, or bound to other associated data).
 */
export function openBlob(blob: Uint8Array, keyFor: (keyId: string) => Uint8Array | undefined, associatedData: Uint8Array): Buffer {
  const kid = sealedKeyId(blob);
  const key = keyFor(kid);
  if (!key) throw new SealedFormatError(`no key ${kid} in the ring (was it dropped before every value was re-sealed?)`);
  const b = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
  const at = 2 + b[1]!;
  return openParts(
    key,
    b.subarray(at, at + NONCE_BYTES),
    b.subarray(at + NONCE_BYTES, at + NONCE_BYTES + TAG_BYTES),
    b.subarray(at + NONCE_BYTES + TAG_BYTES),
    associatedData,
  );
}

/**
 * AES-256-GCM opening of a nonce, tag and ciphertext laid out by an older format
 * (./legacy-formats.ts reads what earlier versions stored; nothing seals that way any more).
 */
export function openParts(key: Uint8Array, nonce: Uint8Array, tag: Uint8Array, data: Uint8Array, associatedData: Uint8Array | null): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', key, nonce);
  if (associatedData) decipher.setAAD(associatedData);
  decipher.setAuthTag(tag);
  try {
    const out = decipher.update(data);
    // final() authenticates (it throws before anything is returned); GCM leaves nothing for it, so no copy.
    const last = decipher.final();
    return last.length ? Buffer.concat([out, last]) : out;
  } catch {
    throw new SealedFormatError('sealed value does not authenticate (altered, or sealed for another purpose or subject)');
  }
}

export const toText = (blob: Uint8Array): string => TEXT_PREFIX + Buffer.from(blob).toString('base64url');
export const isSealedText = (text: string): boolean => text.startsWith(TEXT_PREFIX);
export function fromText(text: string): Buffer {
  if (!isSealedText(text)) throw new SealedFormatError('not a sealed text value');
  return Buffer.from(text.slice(TEXT_PREFIX.length), 'base64url');
}
