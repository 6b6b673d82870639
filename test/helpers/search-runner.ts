/** A `search` queue served by the project's own runner (platform/worker-runtime/run-queue.ts), with a handler the test gives. */
import { loadConfig } from '../../processes/config.js';
import type { SearchJob, SearchResult } from '../../platform/jobs/index.js';
import { createLogger } from '../../platform/logger.js';
import { runQueues, type JobContext, type QueueRunner } from '../../platform/worker-runtime/run-queue.js';

export function startSearchRunner(
  redisUrl: string,
  redisPrefix: string,
  handle: (payload: SearchJob, ctx: JobContext) => unknown,
  concurrency = 1,
): Promise<QueueRunner<'search'>> {
  const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: redisUrl, REDIS_PREFIX: redisPrefix });
  return runQueues(
    config,
    ['search'],
    { search: async (payload, ctx) => (await handle(payload, ctx)) as SearchResult },
    {
      logger: createLogger({ level: 'silent' }),
      concurrency,
    },
  );
}

/** The probe fields of a search job whose handler never reads the probe (tests of the queue path, not of search). */
export const UNREAD_PROBE = { embeddingRef: 'unread', embeddingSalt: 'unread' } as const;
