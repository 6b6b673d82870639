/**
 * Face templates at rest: a canonical embedding is stored only sealed for the `templates` purpose of the
 * key ring (./key-ring.ts, the user id as subject), so a database dump, a replica or a backup holds no
 * template in clear, and a blob copied onto another user's row does not open.
 *
 * Every process holds the ring it was configured with (`processKeyRing`); readers open right after
 * the read and keep the plaintext only in memory.
 */
import { config, type Config } from '../config.js';
import { decodeEmbedding, encodeEmbedding } from '../face/embeddings.js';
import { KeyRing } from './key-ring.js';

/** The ring of a configuration: the `keys` group, and the signing key only to read what earlier versions derived from it. */
export function keyRingOf(c: Pick<Config, 'keys' | 'security'>): KeyRing {
  return KeyRing.from({ ...c.keys, signingKeyPem: c.security.jwtPrivateKey });
}

let ring: KeyRing | undefined;

/** This process's key ring, from its configuration (parsed once). */
export function processKeyRing(): KeyRing {
  ring ??= keyRingOf(config());
  return ring;
}

/** 512 numbers -> a blob bound to `userId` (validates the embedding first). */
export function sealTemplate(keyRing: KeyRing, userId: string, embedding: ArrayLike<number>): Buffer {
  return keyRing.seal('templates', encodeEmbedding(embedding), userId);
}

/** The bytes of a template already encoded (a rotation re-seals what it opened, unchanged). */
export function sealTemplateBytes(keyRing: KeyRing, userId: string, bytes: Uint8Array): Buffer {
  return keyRing.seal('templates', bytes, userId);
}

/** A blob -> the 512 floats; throws KeyRingError for a blob of a dropped key, tampered, or of another user. */
export function openTemplate(keyRing: KeyRing, userId: string, blob: Uint8Array): Float32Array {
  return decodeEmbedding(keyRing.open('templates', blob, userId));
}
