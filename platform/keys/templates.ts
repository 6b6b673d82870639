/**
 * Face templates at rest: a canonical embedding is stored only as a key-ring blob (AES-256-GCM, the
 * user id as associated data, platform/keys/key-ring.ts), so a database dump, a replica or a backup
 * holds no template in clear, and a blob copied onto another user's row does not decrypt.
 *
 * Every process holds the ring it was configured with (`processKeyRing`); readers decrypt right after
 * the read and keep the plaintext only in memory.
 */
import { config } from '../config.js';
import { decodeEmbedding, encodeEmbedding } from '../face/embeddings.js';
import { BiometricKeyRing } from './key-ring.js';

let ring: BiometricKeyRing | undefined;

/** This process's key ring, from BIOMETRIC_KEYS / BIOMETRIC_ACTIVE_KEY_ID (parsed once). */
export function processKeyRing(): BiometricKeyRing {
  ring ??= BiometricKeyRing.from(config().security);
  return ring;
}

/** 512 numbers -> a blob bound to `userId` (validates the embedding first). */
export function sealTemplate(keyRing: BiometricKeyRing, userId: string, embedding: ArrayLike<number>): Buffer {
  return keyRing.encrypt(encodeEmbedding(embedding), userId);
}

/** A blob -> the 512 floats; throws KeyRingError for a blob of a dropped key, tampered, or of another user. */
export function openTemplate(keyRing: BiometricKeyRing, userId: string, blob: Uint8Array): Float32Array {
  return decodeEmbedding(keyRing.decrypt(blob, userId));
}
