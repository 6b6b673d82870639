/**
 * The one key ring of the deployment (README.md beside this file): named 32-byte keys (BIOMETRIC_KEYS),
 * one of them active (BIOMETRIC_ACTIVE_KEY_ID). Nothing is sealed under a ring key itself: each purpose
 * gets its own data key, derived from a ring key with HKDF-SHA256 and the purpose as label, so a key
 * used for face templates never opens a webhook secret, and a value sealed for one purpose or subject
 * does not open for another (the associated data names both). Every sealed value names the ring key
 * its data key came from; the ring opens with any key it holds and seals with the active one, so a key
 * is rotated without downtime: `npm run rotate-biometric-key` re-seals every stored family
 * (./sealed-families.ts), after which the old key can be dropped.
 *
 * The signing key (JWT_PRIVATE_KEY) only signs: no data key comes from it. Values earlier versions
 * sealed otherwise are still read (./legacy-formats.ts) until the rotation re-seals them.
 *
 * An empty ring is one fixed development key (`dev`), which production refuses (platform/config.ts).
 */
import { createHash, createHmac, hkdfSync } from 'node:crypto';
import { isSealedBlob, isSealedText, openBlob, sealBlob, sealedKeyId, SealedFormatError, fromText, toText } from './sealed-format.js';
import {
  isLegacyRingBlob,
  isLegacyText,
  legacyRingKeyId,
  openLegacyRingBlob,
  openLegacyTotpSecret,
  openLegacyWebhookSecret,
  type LegacyKeySettings,
} from './legacy-formats.js';

/**
 * The floor's purposes, what each protects; each purpose gets its own data key from every ring key.
 * Templates and captures are sealed by several wings (face, dedupe, identity, liveness), hand-offs by
 * the face path. A wing's own purposes are declared in its manifest (`keyPurposes`, platform/wing.ts)
 * and typed into `KeyPurposes` by declaration merging, as its settings are into `Config`.
 */
export const FLOOR_KEY_PURPOSES = {
  templates: 'face templates: canonical embeddings, watch-list templates, the embeddings the identity wing keeps in Redis',
  captures: 'face images: dedupe case captures, the live captures and registry photos the identity wing keeps in Redis',
  handoffs: 'face-path hand-offs in Redis (a subkey per request, with a salt that travels in the job)',
} as const satisfies Record<string, string>;

/** Every purpose of the house: the floor's, and each wing's (`declare module ... { interface KeyPurposes { ... } }` in its manifest). */
export interface KeyPurposes {
  templates: true;
  captures: true;
  handoffs: true;
}
export type KeyPurpose = keyof KeyPurposes;

/** Purposes whose values earlier versions sealed under the ring key itself (ring blob v1). */
const LEGACY_RING_PURPOSES: ReadonlySet<string> = new Set(['templates', 'captures', 'registry-values']);

const KID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
const HKDF_SALT = Buffer.from('faceid key ring', 'utf8');

/** The development ring's one key: fixed, public, refused in production. */
export const DEVELOPMENT_KEY_ID = 'dev';
const DEVELOPMENT_KEY = createHash('sha256').update('faceid development biometric key: never in production').digest();

export class KeyRingError extends Error {}

/** Parses `kid:base64,kid:base64`; every key must be 32 bytes, every kid unique. */
export function parseKeyRing(raw: string): Map<string, Buffer> {
  const keys = new Map<string, Buffer>();
  for (const part of raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = part.indexOf(':');
    const kid = part.slice(0, at),
      b64 = part.slice(at + 1);
    if (at < 1 || !KID_PATTERN.test(kid))
      throw new KeyRingError(`BIOMETRIC_KEYS: "${kid || part.slice(0, 8)}…" is not kid:base64 (kid: letters, digits, . _ -)`);
    const key = Buffer.from(b64, 'base64');
    if (key.length !== 32) throw new KeyRingError(`BIOMETRIC_KEYS: key ${kid} must be 32 bytes of base64 (got ${key.length})`);
    if (keys.has(kid)) throw new KeyRingError(`BIOMETRIC_KEYS: key id ${kid} appears twice`);
    keys.set(kid, key);
  }
  return keys;
}

/** The settings a ring is built from (the `keys` group of the configuration, and the legacy readers' keys). */
export interface KeyRingSettings {
  biometricKeys: string;
  biometricActiveKeyId: string;
  /** Deprecated: only opens TOTP secrets sealed by earlier versions. */
  mfaEncryptionKey?: string;
  /** Only to open values earlier versions sealed under a key derived from it; never a data key. */
  signingKeyPem?: string;
}

const associatedData = (purpose: KeyPurpose, subject: string) => Buffer.from(`${purpose}\0${subject}`, 'utf8');

export class KeyRing {
  private readonly dataKeys = new Map<string, Buffer>();

  private constructor(
    private readonly keys: ReadonlyMap<string, Buffer>,
    readonly activeKeyId: string,
    private readonly legacy: LegacyKeySettings,
  ) {}

  /** From the settings; an empty ring is the development key (the config refuses that in production). */
  static from(settings: KeyRingSettings): KeyRing {
    const legacy = { mfaEncryptionKey: settings.mfaEncryptionKey ?? '', signingKeyPem: settings.signingKeyPem ?? '' };
    const keys = parseKeyRing(settings.biometricKeys);
    if (keys.size === 0) return new KeyRing(new Map([[DEVELOPMENT_KEY_ID, DEVELOPMENT_KEY]]), DEVELOPMENT_KEY_ID, legacy);
    const active = settings.biometricActiveKeyId || [...keys.keys()].at(-1)!;
    if (!keys.has(active)) throw new KeyRingError(`BIOMETRIC_ACTIVE_KEY_ID ${active} is not in BIOMETRIC_KEYS`);
    return new KeyRing(keys, active, legacy);
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /** The data key of `purpose` under ring key `keyId` (HKDF-SHA256, the purpose as label); undefined for a key the ring does not hold. */
  private dataKey(purpose: KeyPurpose, keyId: string): Buffer | undefined {
    const id = `${purpose}\0${keyId}`;
    let key = this.dataKeys.get(id);
    if (!key) {
      const root = this.keys.get(keyId);
      if (!root) return undefined;
      key = Buffer.from(hkdfSync('sha256', root, HKDF_SALT, `faceid data key: ${purpose}`, 32));
      this.dataKeys.set(id, key);
    }
    return key;
  }

  /** Seals `plaintext` for `purpose`, bound to `subject` (a row's id, a file frame's position, ...), under the active key. */
  seal(purpose: KeyPurpose, plaintext: Uint8Array, subject: string): Buffer {
    return sealBlob(this.dataKey(purpose, this.activeKeyId)!, this.activeKeyId, plaintext, associatedData(purpose, subject));
  }

  /**
   * Opens what `seal` sealed for this purpose and subject (and, for templates and captures, a ring blob
   * of earlier versions). Throws KeyRingError for a value of a key the ring does not hold, altered, or
   * sealed for another purpose or subject.
   */
  open(purpose: KeyPurpose, blob: Uint8Array, subject: string): Buffer {
    try {
      if (isLegacyRingBlob(blob) && LEGACY_RING_PURPOSES.has(purpose)) return openLegacyRingBlob(blob, (kid) => this.keys.get(kid), subject);
      return openBlob(blob, (kid) => this.dataKey(purpose, kid), associatedData(purpose, subject));
    } catch (e) {
      throw e instanceof SealedFormatError ? new KeyRingError(e.message) : e;
    }
  }

  /** `seal` for a text column: `k3.` + base64url of the blob. */
  sealText(purpose: KeyPurpose, text: string, subject: string): string {
    return toText(this.seal(purpose, Buffer.from(text, 'utf8'), subject));
  }

  /** Opens what `sealText` sealed; for TOTP and webhook secrets, also the text formats of earlier versions. */
  openText(purpose: KeyPurpose, sealed: string, subject: string): string {
    if (isSealedText(sealed)) return this.open(purpose, fromText(sealed), subject).toString('utf8');
    try {
      if (isLegacyText(sealed) && purpose === 'totp-secrets') return openLegacyTotpSecret(sealed, this.legacy);
      if (isLegacyText(sealed) && purpose === 'webhook-secrets') return openLegacyWebhookSecret(sealed, subject, this.legacy);
    } catch (e) {
      throw e instanceof SealedFormatError ? new KeyRingError(e.message) : e;
    }
    throw new KeyRingError('not a sealed value');
  }

  /** The ring key a sealed value names (binary or text, current or legacy layout), without opening it. */
  static keyIdOf(sealed: Uint8Array | string): string {
    if (typeof sealed === 'string') {
      if (isSealedText(sealed)) return KeyRing.keyIdOf(fromText(sealed));
      if (isLegacyText(sealed)) return 'legacy';
      throw new KeyRingError('not a sealed value');
    }
    if (isSealedBlob(sealed)) return sealedKeyId(sealed);
    if (isLegacyRingBlob(sealed)) return legacyRingKeyId(sealed);
    throw new KeyRingError('not a sealed value');
  }

  /** Whether a stored value must be re-sealed: an older layout, or another key than the active one. */
  needsRotation(sealed: Uint8Array | string): boolean {
    const current = typeof sealed === 'string' ? isSealedText(sealed) : isSealedBlob(sealed);
    return !current || KeyRing.keyIdOf(sealed) !== this.activeKeyId;
  }

  /**
   * A 256-bit subkey of one purpose's data key and a salt: HMAC-SHA256(data key, salt). For values
   * whose salt travels apart from them (platform/face-path/sealing.ts): neither the salt alone nor the
   * ring alone gives the subkey. Throws KeyRingError for a key the ring does not hold.
   */
  saltedKey(purpose: KeyPurpose, salt: Uint8Array, keyId: string = this.activeKeyId): Buffer {
    const key = this.dataKey(purpose, keyId);
    if (!key) throw new KeyRingError(`no key ${keyId} in the ring (was it dropped before every value was re-sealed?)`);
    return hmacKey(key, salt);
  }

  /** The associated data a value of `purpose` for `subject` is bound to (for values opened outside the ring: the native re-rank rows of search snapshots). */
  static associatedData(purpose: KeyPurpose, subject: string): Buffer {
    return associatedData(purpose, subject);
  }
}

const hmacKey = (key: Buffer, salt: Uint8Array) => createHmac('sha256', key).update(salt).digest();
