/**
 * The single-use token, the one primitive behind link tokens and proof tokens: 256 random bits
 * (base64url), of which Redis holds only the SHA-256 (inside the key) → a value, with a TTL. The token
 * itself is never stored or logged.
 *
 * Taking a token is one Lua script (get + compare + delete): of any number of concurrent takers
 * exactly one gets the value. A token bound to someone (`expect`) is refused to anyone else without
 * being burnt for its owner. A taker whose work then fails may give the token back for its remaining
 * lifetime (`restore`), so a failed step does not cost the user a new token.
 */
import { createHash, randomBytes } from 'node:crypto';
import { replicaAcknowledged, type Redis } from './redis.js';

const TOKEN_BYTES = 32;

// KEYS[1] = token key; ARGV[1] = the value the token must be bound to ('' = any).
// Returns { value, pttl } and deletes the key, or nil (missing, expired, taken, or bound to another).
const TAKE_LUA = `
local v = redis.call('GET', KEYS[1])
if not v then return nil end
if ARGV[1] ~= '' and v ~= ARGV[1] then return nil end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
return { v, ttl }`;

export const hashToken = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');

/** A fresh token: `prefix_` + 256 random bits, or the bare random part without a prefix. */
export const newToken = (prefix?: string) => {
  const random = randomBytes(TOKEN_BYTES).toString('base64url');
  return prefix ? `${prefix}_${random}` : random;
};

export interface TakenToken {
  value: string;
  /** Milliseconds the token had left: what `restore` gives back. */
  pttlMs: number;
}

/**
 * Tokens of one kind: `keyOf` names the Redis key of a token's hash (it may bind more, such as the
 * user and registry of a link token, so that a token presented on the wrong route is simply not found).
 */
export class SingleUseTokens<K extends unknown[] = []> {
  constructor(
    private readonly redis: Redis,
    private readonly keyOf: (hash: string, ...scope: K) => string,
  ) {}

  /** The Redis key of a token (tests expire one through it). */
  key(token: string, ...scope: K): string {
    return this.keyOf(hashToken(token), ...scope);
  }

  /** Stores `value` under a fresh token for `ttlSeconds`. */
  async issue(value: string, ttlSeconds: number, scope: K, opts: { prefix?: string } = {}): Promise<string> {
    const token = newToken(opts.prefix);
    await this.redis.set(this.key(token, ...scope), value, 'EX', ttlSeconds);
    // A token a client holds must survive a Redis failover (docs/deployment.md).
    await replicaAcknowledged(this.redis);
    return token;
  }

  /** Takes the token once (atomic under concurrency); null when it is not there or bound to another. */
  async take(token: string, scope: K, opts: { expect?: string } = {}): Promise<TakenToken | null> {
    const got = (await this.redis.eval(TAKE_LUA, 1, this.key(token, ...scope), opts.expect ?? '')) as [string, number] | null;
    // ... and so must its taking: a failover must not bring a used token back for a second use.
    if (got) await replicaAcknowledged(this.redis);
    return got ? { value: got[0], pttlMs: Number(got[1]) } : null;
  }

  /** Gives a taken token back for the lifetime it had left (never over a newer one). */
  async restore(token: string, scope: K, taken: TakenToken): Promise<void> {
    if (taken.pttlMs > 0) await this.redis.set(this.key(token, ...scope), taken.value, 'PX', taken.pttlMs, 'NX');
  }
}
