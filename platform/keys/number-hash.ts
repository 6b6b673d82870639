/**
 * The keyed hash a link row keeps of its NIN/BVN (HMAC-SHA256 under LINK_NUMBER_HASH_KEY): an erased
 * account's link row keeps only this, so the number is still recognised (who held it, that it was
 * released) without being stored. Keyed, because an 11-digit number space is small enough to hash
 * exhaustively: without the key the hash says nothing. Never rotated: a new key forgets every erased
 * number (docs/data-protection.md).
 */
import { createHash, createHmac } from 'node:crypto';

const DEVELOPMENT_KEY = createHash('sha256').update('faceid development link-number hash key: never in production').digest();

export class NumberHasher {
  private readonly key: Buffer;

  constructor(keyB64: string) {
    this.key = keyB64 ? Buffer.from(keyB64, 'base64') : DEVELOPMENT_KEY;
  }

  static from(settings: { linkNumberHashKey: string }): NumberHasher {
    return new NumberHasher(settings.linkNumberHashKey);
  }

  /** hex HMAC of `registry:number` (the same number in the two registries hashes differently). */
  hash(registry: 'nin' | 'bvn', number: string): string {
    return createHmac('sha256', this.key).update(`${registry}:${number}`).digest('hex');
  }
}
