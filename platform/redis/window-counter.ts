/** A fixed-window counter in Redis: one atomic script counts a hit and says how long the window lasts. */
import type { Redis } from './redis.js';

// KEYS[1] = the counter; ARGV[1] = window (ms). Returns { count, ms until the window ends }.
const COUNT_LUA = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return { n, redis.call('PTTL', KEYS[1]) }`;

export async function countInWindow(redis: Redis, key: string, windowMs: number): Promise<{ count: number; resetInSeconds: number }> {
  const [count, ttlMs] = (await redis.eval(COUNT_LUA, 1, key, windowMs)) as [number, number];
  return { count, resetInSeconds: Math.max(1, Math.ceil(ttlMs / 1000)) };
}

export const HOUR_MS = 3_600_000;
export const DAY_MS = 24 * HOUR_MS;
