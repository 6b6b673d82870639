/**
 * proofTokens: the short-lived, single-use proof that the consumer just passed POST /verify/self,
 * required by PATCH and DELETE /users/{id}.
 *
 * - The token is 256 random bits (base64url); Redis holds only its SHA-256 (the key) → the user id,
 *   with a TTL of PROOF_TOKEN_TTL_SECONDS. The token itself is never stored or logged.
 * - Consumption is one Lua script (compare-and-delete): the key is deleted only when it exists AND is
 *   bound to the presenting user. Under concurrent replay exactly one caller gets the key; another
 *   user's token is refused without burning it for its owner.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Config } from '../../shared/config.js';
import { AppError } from '../../shared/errors.js';
import type { KeySpace, Redis } from '../../shared/redis.js';

export interface ProofTokenDeps {
  config: Pick<Config, 'proofTokenTtlSeconds'>;
  redis: Redis;
  keys: KeySpace;
}

const TOKEN_BYTES = 32;

/** The Redis key of a token: its hash under the deployment prefix (exported for tests that expire one). */
export function proofTokenKey(deps: Pick<ProofTokenDeps, 'keys'>, token: string): string {
  return deps.keys('proof', createHash('sha256').update(token, 'utf8').digest('hex'));
}

/** Issues a fresh single-use proofToken bound to `userId` (called by /verify/self on a match). */
export async function issueProofToken(deps: ProofTokenDeps, userId: string): Promise<{ proofToken: string; expiresIn: number }> {
  const proofToken = randomBytes(TOKEN_BYTES).toString('base64url');
  const expiresIn = deps.config.proofTokenTtlSeconds;
  await deps.redis.set(proofTokenKey(deps, proofToken), userId, 'EX', expiresIn);
  return { proofToken, expiresIn };
}

// KEYS[1] = token key, ARGV[1] = the presenting user: delete and return 1 only when bound to that user.
const CONSUME_LUA = `
local v = redis.call('GET', KEYS[1])
if v and v == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0`;

/**
 * Consumes `token` for `userId` atomically. Missing, malformed, expired, already used or another
 * user's token → 403 `proof_token_invalid`.
 */
export async function consumeProofToken(deps: ProofTokenDeps, userId: string, token: string | undefined | null): Promise<void> {
  if (typeof token !== 'string' || token.length === 0 || token.length > 256) {
    throw invalid();
  }
  const consumed = (await deps.redis.eval(CONSUME_LUA, 1, proofTokenKey(deps, token), userId)) as number;
  if (consumed !== 1) throw invalid();
}

function invalid(): AppError {
  return new AppError('proof_token_invalid', 'A fresh proofToken from POST /verify/self is required (missing, expired, used or not yours)');
}
