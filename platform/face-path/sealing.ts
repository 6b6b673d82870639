/**
 * How the biometrics of a face request are sealed while they cross Redis: the image, the aligned face
 * and a search probe as values beside their jobs (./handoff.ts), and the embedding an embed job returns.
 *
 * The key that opens a hand-off is never in Redis. It is derived (HMAC-SHA256, ../keys/key-ring.ts
 * `saltedKey`) from the `handoffs` data key of a ring key, which only the processes hold (BIOMETRIC_KEYS),
 * and a fresh per-request salt, which travels in the job payload (`resultSalt`, `alignedFaceSalt`,
 * `embeddingSalt`). So:
 * - a Redis dump (job payloads and sealed values together) opens nothing: the salt is not a key;
 * - the ring alone opens nothing either: each request's values need that request's salt;
 * - once a job hash is gone (the job finished, was withdrawn or wiped), what BullMQ or a reply list may
 *   still hold sealed with its salt cannot be opened even with the ring, because the salt is gone too.
 *
 * A sealed value is in the one sealed format (../keys/sealed-format.ts) and names the ring key its
 * subkey came from, so a value sealed just before a rotation still opens while the ring holds that key.
 *
 *   buffer (a Redis value):  the sealed blob
 *   SealedEmbedding (JSON, in a job result):  { sealed: base64 of the sealed blob }
 */
import { randomBytes } from 'node:crypto';
import type { KeyRing } from '../keys/key-ring.js';
import { openBlob, sealBlob, sealedKeyId } from '../keys/sealed-format.js';
import { decodeEmbedding, encodeEmbedding } from '../face/embeddings.js';

export interface SealedEmbedding {
  /** The sealed blob (base64): it names the ring key the subkey was derived from. */
  sealed: string;
}

/** Hand-offs carry no subject of their own: the per-request salt already binds a value to its request. */
const NO_SUBJECT = Buffer.from('handoffs\0', 'utf8');

/** A fresh per-request salt (32 random bytes, base64): the half of a hand-off's key that travels in the job. */
export const newHandoffSalt = (): string => randomBytes(32).toString('base64');

export class HandoffSealer {
  constructor(private readonly ring: KeyRing) {}

  private key(salt: string, keyId?: string): Buffer {
    if (!salt) throw new RangeError('a hand-off needs its salt');
    return this.ring.saltedKey('handoffs', Buffer.from(salt, 'utf8'), keyId);
  }

  /** Bytes -> one compact buffer, for a Redis value. */
  seal(bytes: Uint8Array, salt: string): Buffer {
    return sealBlob(this.key(salt), this.ring.activeKeyId, bytes, NO_SUBJECT);
  }

  /** Opens what `seal` sealed; throws on a wrong salt, a key the ring does not hold, or altered bytes. */
  open(sealed: Buffer, salt: string): Buffer {
    if (!salt) throw new RangeError('a hand-off needs its salt');
    return openBlob(sealed, (kid) => this.key(salt, kid), NO_SUBJECT);
  }

  /** An embedding as a job result's JSON field. */
  sealEmbedding(embedding: ArrayLike<number>, salt: string): SealedEmbedding {
    return { sealed: this.seal(encodeEmbedding(embedding), salt).toString('base64') };
  }

  openEmbedding(sealed: SealedEmbedding, salt: string): number[] {
    const blob = Buffer.from(sealed.sealed, 'base64');
    sealedKeyId(blob); // refuses another layout before any key is derived
    return Array.from(decodeEmbedding(this.open(blob, salt)));
  }
}
