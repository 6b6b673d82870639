/**
 * The operator sign-in caps per client address (the rules are OperatorAuthService's):
 * - `login:failures:<address bucket>`: failed sign-ins from one address in the current hour, whatever
 *   the identifier (password spraying).
 * - `login:ip:<address bucket>:account:<identifier hash>`: attempts from one address at one account.
 */
import type { KeySpace, Redis } from '../../platform/redis/redis.js';
import { countInWindow, HOUR_MS } from '../../platform/redis/window-counter.js';

export class LoginAttemptStore {
  constructor(
    private readonly redis: Redis,
    private readonly keys: KeySpace,
  ) {}

  private failuresKey = (addressBucket: string) => this.keys('login', 'failures', addressBucket);

  /** Failures counted from the address in its current window, and the milliseconds the window has left. */
  async failures(addressBucket: string): Promise<{ count: number; ttlMs: number }> {
    const key = this.failuresKey(addressBucket);
    const [failures, ttlMs] = await Promise.all([this.redis.get(key), this.redis.pttl(key)]);
    return { count: Number(failures ?? 0), ttlMs };
  }

  /** Counts one failure from the address. */
  async countFailure(addressBucket: string): Promise<void> {
    await countInWindow(this.redis, this.failuresKey(addressBucket), HOUR_MS);
  }

  /** Counts one attempt from the address at the account (hashed identifier) in the current hour. */
  countAttempt(addressBucket: string, accountHash: string): Promise<{ count: number; resetInSeconds: number }> {
    return countInWindow(this.redis, this.keys('login', 'ip', addressBucket, 'account', accountHash), HOUR_MS);
  }
}
