/**
 * Operator passwords: Node's built-in scrypt (memory-hard), no native add-on to build.
 *
 * Stored as a self-describing string `scrypt$N$r$p$<salt>$<key>` (salt and key in base64url), so the
 * cost can be raised later without a migration: `needsRehash` tells the login to re-hash on the next
 * success. Comparison is constant-time. Why scrypt and these numbers: docs/decisions.md.
 */
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

export const SCRYPT = { N: 2 ** 15, r: 8, p: 1, saltBytes: 16, keyBytes: 64 } as const;

/** Bounds a stored hash's parameters must respect (a tampered row must not make us burn the server). */
const LIMITS = { minN: 2 ** 14, maxN: 2 ** 20, maxR: 32, maxP: 16, minSalt: 16, minKey: 32, maxKey: 128 };

const deriveKey = (password: string, salt: Buffer, keyBytes: number, opts: { N: number; r: number; p: number }) =>
  new Promise<Buffer>((resolve, reject) => {
    // scrypt needs 128 * N * r * p bytes; Node's default cap (32 MiB) is exactly N=2^15, r=8: leave headroom.
    const options: ScryptOptions = { ...opts, maxmem: 128 * opts.N * opts.r * opts.p + 16 * 1024 * 1024 };
    scrypt(normalise(password), salt, keyBytes, options, (err, key) => (err ? reject(err) : resolve(key)));
  });

/** The same password typed on two keyboards may arrive composed or decomposed: compare one form. */
const normalise = (password: string) => password.normalize('NFC');

interface Parsed {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  key: Buffer;
}

function parse(stored: string): Parsed | null {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const [N, r, p] = parts.slice(1, 4).map((x) => (/^[0-9]{1,8}$/.test(x!) ? Number(x) : NaN)) as [number, number, number];
  const salt = Buffer.from(parts[4]!, 'base64url');
  const key = Buffer.from(parts[5]!, 'base64url');
  const powerOfTwo = Number.isInteger(N) && N > 1 && (N & (N - 1)) === 0;
  if (!powerOfTwo || N < LIMITS.minN || N > LIMITS.maxN) return null;
  if (!(r >= 1 && r <= LIMITS.maxR && p >= 1 && p <= LIMITS.maxP)) return null;
  if (salt.length < LIMITS.minSalt || key.length < LIMITS.minKey || key.length > LIMITS.maxKey) return null;
  return { N, r, p, salt, key };
}

function format(N: number, r: number, p: number, salt: Buffer, key: Buffer): string {
  return `scrypt$${N}$${r}$${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SCRYPT.saltBytes);
  const key = await deriveKey(password, salt, SCRYPT.keyBytes, SCRYPT);
  return format(SCRYPT.N, SCRYPT.r, SCRYPT.p, salt, key);
}

/**
 * A well-formed hash of no password anyone knows, at the current cost: checking against it takes as
 * long as a real check, so an unknown identifier is answered in the same time as a wrong password.
 */
const DUMMY = format(SCRYPT.N, SCRYPT.r, SCRYPT.p, randomBytes(SCRYPT.saltBytes), randomBytes(SCRYPT.keyBytes));
const DUMMY_PARSED = parse(DUMMY)!;

/** True when `password` matches `stored`. A malformed `stored` costs the same time and is false. */
export async function verifyPassword(password: string, stored: string | null | undefined): Promise<boolean> {
  const parsed = (stored && parse(stored)) || null;
  const target = parsed ?? DUMMY_PARSED;
  const key = await deriveKey(password, target.salt, target.key.length, target);
  return parsed !== null && key.length === target.key.length && timingSafeEqual(key, target.key);
}

/** Spends one password check's time and answers false (the unknown-identifier path of a login). */
export async function burnPasswordCheck(password: string): Promise<false> {
  await verifyPassword(password, DUMMY);
  return false;
}

/** True when a stored hash was made with other parameters than today's (re-hash at the next login). */
export function needsRehash(stored: string): boolean {
  const parsed = parse(stored);
  return !parsed || parsed.N !== SCRYPT.N || parsed.r !== SCRYPT.r || parsed.p !== SCRYPT.p || parsed.key.length !== SCRYPT.keyBytes;
}

/** A temporary password an administrator hands over: 96 random bits, 16 base64url characters. */
export function temporaryPassword(): string {
  return randomBytes(12).toString('base64url');
}
