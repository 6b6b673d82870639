/**
 * Access tokens: EdDSA (Ed25519) JWTs signed with jose. `aud` separates consumer and operator tokens;
 * `sid` names the session, checked against PostgreSQL on every request so that logout, deactivation
 * and deletion take effect at once, not at expiry. A development key is generated when none is
 * configured; production refuses to start without JWT_PRIVATE_KEY (platform/config.ts).
 *
 * A key ring: every token names its signing key in the `kid` header (an RFC 7638 thumbprint); the
 * current key signs, the current and JWT_PREVIOUS_PUBLIC_KEYS verify, so a rotation logs nobody out.
 * A token naming an unknown key is refused; one without `kid` (issued before the ring) is checked
 * against the current key.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, hkdfSync, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { SignJWT, jwtVerify, errors as joseErrors, type JWTHeaderParameters } from 'jose';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';

export type Audience = 'consumer' | 'operator';
const ADMIN_UI_AUDIENCE = 'admin-ui';
const ALG = 'EdDSA';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface AccessClaims {
  sub: string;
  aud: Audience;
  sid: string;
  exp: number;
}

export const DEV_KEY_FILE = 'var/dev-jwt-key.pem';

function loadOrCreateDevKey(file: string): KeyObject {
  if (existsSync(file)) return createPrivateKey(readFileSync(file));
  const { privateKey } = generateKeyPairSync('ed25519');
  mkdirSync(path.dirname(file), { recursive: true });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' });
  try {
    writeFileSync(file, pem, { mode: 0o600, flag: 'wx' });
  } catch {
    return createPrivateKey(readFileSync(file)); // another process wrote it first
  }
  return privateKey;
}

/** RFC 7638 thumbprint of an Ed25519 public key (its JWK `crv`, `kty`, `x`), base64url: the `kid`. */
export function keyId(publicKey: KeyObject): string {
  const jwk = publicKey.export({ format: 'jwk' }) as { crv: string; x: string };
  return createHash('sha256')
    .update(JSON.stringify({ crv: jwk.crv, kty: 'OKP', x: jwk.x }))
    .digest('base64url');
}

/** Public keys from concatenated PEM blocks (public or private). */
function previousKeys(pems: string): KeyObject[] {
  const blocks = pems.replace(/\\n/g, '\n').match(/-----BEGIN [A-Z ]+-----[\s\S]+?-----END [A-Z ]+-----/g) ?? [];
  return blocks.map((pem) => (pem.includes('PRIVATE KEY') ? createPublicKey(createPrivateKey(pem)) : createPublicKey(pem)));
}

export class TokenService {
  private readonly privateKey: KeyObject;
  private readonly publicKey: KeyObject;
  private readonly kid: string;
  /** Every key that verifies, by `kid`: the current one and the previous ones. */
  private readonly ring = new Map<string, KeyObject>();

  constructor(private readonly config: Pick<Config, 'security'> & Partial<Pick<Config, 'otp'>>) {
    this.privateKey = config.security.jwtPrivateKey ? createPrivateKey(config.security.jwtPrivateKey.replace(/\\n/g, '\n')) : loadOrCreateDevKey(DEV_KEY_FILE);
    if (this.privateKey.asymmetricKeyType !== 'ed25519') throw new Error('JWT_PRIVATE_KEY must be an Ed25519 key');
    this.publicKey = createPublicKey(this.privateKey);
    this.kid = keyId(this.publicKey);
    for (const k of previousKeys(config.security.jwtPreviousPublicKeys ?? '')) {
      if (k.asymmetricKeyType !== 'ed25519') throw new Error('JWT_PREVIOUS_PUBLIC_KEYS must hold Ed25519 keys');
      this.ring.set(keyId(k), k);
    }
    this.ring.set(this.kid, this.publicKey);
  }

  /** The verifying key a token names (no `kid`: the current key); an unknown `kid` is refused. */
  private readonly verifyingKey = (header: JWTHeaderParameters): KeyObject => {
    if (header.kid === undefined) return this.publicKey;
    const key = this.ring.get(header.kid);
    if (!key) throw new Error('unknown kid');
    return key;
  };

  /**
   * The key of consumer one-time codes: OTP_SECRET when set (a signing-key rotation leaves pending codes
   * valid), else derived from the signing key.
   */
  otpSecret(): Buffer {
    const own = this.config.otp?.secret;
    return own ? Buffer.from(hkdfSync('sha256', own, 'faceid/otp-secret/v1', 'otp', 32)) : this.deriveSecret('otp');
  }

  /**
   * A 32-byte secret for another purpose (e.g. the HMAC of one-time codes), derived with HKDF from the
   * signing key, so the deployment has one secret to configure and each purpose gets its own key.
   */
  deriveSecret(purpose: string): Buffer {
    const ikm = this.privateKey.export({ type: 'pkcs8', format: 'der' });
    return Buffer.from(hkdfSync('sha256', ikm, 'faceid/derived-secret/v1', purpose, 32));
  }

  get accessTtlSeconds(): number {
    return this.config.security.accessTokenTtlSeconds;
  }

  async signAccess(claims: { sub: string; aud: Audience; sid: string }): Promise<{ token: string; expiresIn: number }> {
    const expiresIn = this.config.security.accessTokenTtlSeconds;
    const token = await new SignJWT({ sid: claims.sid })
      .setProtectedHeader({ alg: ALG, typ: 'JWT', kid: this.kid })
      .setSubject(claims.sub)
      .setAudience(claims.aud)
      .setIssuer(this.config.security.jwtIssuer)
      .setIssuedAt()
      .setExpirationTime(`${expiresIn}s`)
      .sign(this.privateKey);
    return { token, expiresIn };
  }

  /** Verifies signature (EdDSA only: `alg: none` and other algorithms are refused), issuer, expiry and audience. */
  async verifyAccess(token: string, audiences: readonly Audience[]): Promise<AccessClaims> {
    try {
      const { payload } = await jwtVerify(token, this.verifyingKey, {
        algorithms: [ALG],
        issuer: this.config.security.jwtIssuer,
        audience: [...audiences],
        requiredClaims: ['sub', 'exp', 'sid'],
      });
      const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
      // Claims are checked for shape before anything uses them: `sub` and `sid` are row ids (UUIDs) that
      // go into SQL; a correctly signed token with anything else is refused here (401), not by PostgreSQL (500).
      if (typeof payload.sid !== 'string' || typeof payload.sub !== 'string' || !UUID.test(payload.sid) || !UUID.test(payload.sub)) {
        throw new Error('claims');
      }
      if (typeof payload.exp !== 'number' || (aud !== 'consumer' && aud !== 'operator')) throw new Error('claims');
      return { sub: payload.sub, aud: aud as Audience, sid: payload.sid, exp: payload.exp! };
    } catch (e) {
      const expired = e instanceof joseErrors.JWTExpired;
      throw new AppError('unauthorized', expired ? 'The access token has expired' : 'The access token is not valid here');
    }
  }

  /** A short-lived token for the administrators' browser UI cookie (Bull Board). */
  async signAdminUi(sub: string, sid: string, ttlSeconds: number): Promise<string> {
    return new SignJWT({ sid })
      .setProtectedHeader({ alg: ALG, typ: 'JWT', kid: this.kid })
      .setSubject(sub)
      .setAudience(ADMIN_UI_AUDIENCE)
      .setIssuer(this.config.security.jwtIssuer)
      .setIssuedAt()
      .setExpirationTime(`${ttlSeconds}s`)
      .sign(this.privateKey);
  }

  async verifyAdminUi(token: string): Promise<{ sub: string; sid: string }> {
    try {
      const { payload } = await jwtVerify(token, this.verifyingKey, {
        algorithms: [ALG],
        issuer: this.config.security.jwtIssuer,
        audience: ADMIN_UI_AUDIENCE,
        requiredClaims: ['sub', 'exp', 'sid'],
      });
      if (typeof payload.sid !== 'string' || !UUID.test(payload.sid) || !UUID.test(payload.sub ?? '')) throw new Error('claims');
      return { sub: payload.sub!, sid: payload.sid };
    } catch {
      throw new AppError('unauthorized', 'Sign in as an administrator first');
    }
  }
}
