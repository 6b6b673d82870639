/** workers/run-queue.ts: a worker refuses to start with a missing or stray handler. */
import test from 'ava';
import { loadConfig } from '../shared/config.js';
import { createLogger } from '../shared/logger.js';
import { runQueues, type HandlerMap } from '../workers/run-queue.js';
import { TEST_REDIS_URL, testRedisPrefix } from './helpers/db.js';

const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: testRedisPrefix() });
const opts = { logger: createLogger({ level: 'silent' }), concurrency: 1 };

test('a declared queue without a handler, or a handler for a queue not served, refuses to start', async (t) => {
  const missing = { liveness: async () => ({ ok: false, code: 'no_face', faceCount: 0, ms: 0 }) } as unknown as HandlerMap<'liveness' | 'embed'>;
  await t.throwsAsync(runQueues(config, ['liveness', 'embed'], missing, opts), { message: /queue "embed" has no handler/ });

  const stray = { search: async () => ({ op: 'compare', score: null, ms: 0 }), embed: async () => ({ ok: false, code: 'invalid_image', ms: 0 }) } as unknown as HandlerMap<'search'>;
  await t.throwsAsync(runQueues(config, ['search'], stray, opts), { message: /handler for "embed", which this process does not serve/ });

  await t.throwsAsync(runQueues(config, ['nope' as 'search'], { nope: async () => null } as unknown as HandlerMap<'search'>, opts), { message: /not declared in shared\/jobs/ });
});
