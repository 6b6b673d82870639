/**
 * Everything a web process holds, built once: configuration, PostgreSQL, Redis, the job client,
 * metrics and the services. Services receive what they need as arguments, so tests build the same
 * graph against their own database and key prefix.
 */
import type { Knex } from 'knex';
import type { Config } from '../shared/config.js';
import { createDb } from '../shared/db.js';
import { JobClient } from '../shared/job-client.js';
import { createLogger, type Logger } from '../shared/logger.js';
import { createRedis, keySpace, type KeySpace, type Redis } from '../shared/redis.js';
import { Metrics } from './metrics.js';
import { Authorizer } from './services/authorization.js';
import { FaceService } from './services/face-service.js';
import { HealthService } from './services/health-service.js';
import { TokenService } from './services/token-service.js';

export interface AppDeps {
  config: Config;
  logger: Logger;
  db: Knex;
  redis: Redis;
  keys: KeySpace;
  jobs: JobClient;
  metrics: Metrics;
  tokens: TokenService;
  authorizer: Authorizer;
  health: HealthService;
  face: FaceService;
}

export function createDeps(config: Config, opts: { logger?: Logger } = {}): AppDeps {
  const logger = opts.logger ?? createLogger({ level: config.logLevel, name: 'web' });
  const db = createDb(config.databaseUrl, config.databasePoolMax);
  const redis = createRedis(config.redisUrl);
  redis.on('error', (e) => logger.debug({ err: e.message }, 'redis connection error'));
  const metrics = new Metrics();
  const tokens = new TokenService(config);
  const jobs = new JobClient({ redisUrl: config.redisUrl, redisPrefix: config.redisPrefix, timeoutMs: config.faceJobTimeoutMs });
  return {
    config,
    logger,
    db,
    redis,
    keys: keySpace(config.redisPrefix),
    jobs,
    metrics,
    tokens,
    authorizer: new Authorizer(db, tokens),
    health: new HealthService({ config, db, redis, metrics }),
    face: new FaceService({ config, db, jobs, metrics, logger }),
  };
}

export async function closeDeps(deps: AppDeps): Promise<void> {
  deps.health.stopPoller();
  await deps.jobs.close();
  await deps.redis.quit().catch(() => deps.redis.disconnect());
  await deps.db.destroy();
}
