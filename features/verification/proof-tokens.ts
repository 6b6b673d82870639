/**
 * proofTokens: the short-lived, single-use proof that the consumer just passed POST /verify/self,
 * required by PATCH and DELETE /users/{id}. A single-use token (platform/redis/single-use-token.ts) whose
 * value is the user id and the session that ran /verify/self, with a TTL of PROOF_TOKEN_TTL_SECONDS: it
 * is taken only by that user in that session, so another user's token, or the user's own token from
 * another session (a second, stolen session cannot spend the proof of the owner's), is refused without
 * burning it for its owner.
 */
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import type { KeySpace, Redis } from '../../platform/redis/redis.js';
import { SingleUseTokens } from '../../platform/redis/single-use-token.js';

export interface ProofTokenDeps {
  config: Pick<Config, 'identity'>;
  redis: Redis;
  keys: KeySpace;
}

const MAX_TOKEN_LENGTH = 256;

export class ProofTokens {
  private readonly tokens: SingleUseTokens;

  constructor(private readonly deps: ProofTokenDeps) {
    this.tokens = new SingleUseTokens(deps.redis, (hash) => deps.keys('proof', hash));
  }

  key(token: string): string {
    return this.tokens.key(token);
  }

  /** Issues a fresh proofToken bound to `userId` and its session (called by /verify/self on a match). */
  async issue(userId: string, sessionId: string): Promise<{ proofToken: string; expiresIn: number }> {
    const expiresIn = this.deps.config.identity.proofTokenTtlSeconds;
    return { proofToken: await this.tokens.issue(binding(userId, sessionId), expiresIn, []), expiresIn };
  }

  /**
   * Consumes `token` for `userId` in `sessionId` atomically. Missing, malformed, expired, already used,
   * another user's or another session's token → 403 `proof_token_invalid`. A token taken is spent,
   * whatever the request answers next (a refused phone change included): a proof buys one answer.
   */
  async consume(userId: string, sessionId: string, token: string | undefined | null): Promise<void> {
    if (typeof token !== 'string' || token.length === 0 || token.length > MAX_TOKEN_LENGTH) throw invalid();
    const taken = await this.tokens.take(token, [], { expect: binding(userId, sessionId) });
    if (!taken) throw invalid();
  }
}

/** The Redis key of a token: its hash under the deployment prefix (exported for tests that expire one). */
export const proofTokenKey = (deps: ProofTokenDeps, token: string) => new ProofTokens(deps).key(token);

/** Issues a proofToken outside the web process's graph (tests). */
export const issueProofToken = (deps: ProofTokenDeps, userId: string, sessionId: string) => new ProofTokens(deps).issue(userId, sessionId);

const binding = (userId: string, sessionId: string) => `${userId} ${sessionId}`;

function invalid(): AppError {
  return new AppError('proof_token_invalid', 'A fresh proofToken from POST /verify/self is required (missing, expired, used or not yours)');
}
