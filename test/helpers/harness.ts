/**
 * The real service in-process for a test file: its own PostgreSQL database and Redis prefix, the web
 * process (as processes/web.ts composes it) on a free port, and (on request) real face and search
 * workers. Nothing is mocked.
 */
import type { TestFn } from 'ava';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../../processes/config.js';
import { createRedis } from '../../platform/redis/redis.js';
import { closeDeps, createDeps, type AppDeps } from '../../processes/web/deps.js';
import type { RunningWeb } from '../../processes/web/http-server.js';
import type { AnyRoute } from '../../platform/http/route-table.js';
import { createLogger } from '../../platform/logger.js';
import { startWebProcess } from '../../processes/web.js';
import { freePort } from '../../scripts/lib/private-services.js';
import { appRoleUrl, createTestDatabase, testRedisPrefix, TEST_REDIS_URL, type TestDatabase } from './db.js';

export const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');

export interface RunningWorker {
  url: string;
  close(): Promise<void>;
}

export interface HarnessOptions {
  env?: Record<string, string>;
  /** Start a face worker (liveness + embed queues). */
  face?: boolean;
  /** Number of search workers to start. */
  search?: number;
  /** Start the background dependency poller (off by default: tests call /health themselves). */
  poller?: boolean;
  /** Routes mounted beside the real ones (tests of the framework itself). */
  extraRoutes?: AnyRoute[];
  /**
   * Schedule the retention sweep in the web process's upstream worker, as a deployment does (off by
   * default). Its first run is immediate, and the worker starts in the background: on a busy machine
   * that run came after a test had seeded records dated in the past, and purged them under it.
   */
  retentionSweep?: boolean;
  /**
   * Connect every process as a login role that is a member of the least-privilege role `faceid_app`
   * (migrations/20261126080100_app_role.ts), as a deployment does, instead of the owner.
   */
  appRole?: boolean;
  /** Where the web process's log lines go (a test that reads them); stdout otherwise. */
  logDestination?: { write(line: string): unknown };
}

export interface Harness {
  config: Config;
  deps: AppDeps;
  web: RunningWeb;
  url: string;
  db: TestDatabase;
  faceWorkers: RunningWorker[];
  searchWorkers: RunningWorker[];
  outboxFile: string;
  /** The environment of this deployment's processes (to spawn one as a child process). */
  env: Record<string, string>;
  /** Builds the config of another process of this deployment (a second worker, say). */
  configFor(env?: Record<string, string>): Config;
  startFaceWorker(env?: Record<string, string>): Promise<RunningWorker>;
  startSearchWorker(env?: Record<string, string>): Promise<RunningWorker>;
  stop(): Promise<void>;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const db = await createTestDatabase();
  const prefix = testRedisPrefix();
  const [port, facePort, searchPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'faceid-test-'));
  const outboxFile = path.join(tmp, 'sms-outbox.jsonl');
  const baseEnv: Record<string, string> = {
    NODE_ENV: 'test',
    DATABASE_URL: opts.appRole ? await appRoleUrl(db.url) : db.url,
    DATABASE_POOL_MAX: '5',
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: prefix,
    PORT: String(port),
    FACE_ENGINE_PORT: String(facePort),
    SEARCH_HEALTH_PORT: String(searchPort),
    SMS_TRANSPORT: 'outbox',
    SMS_OUTBOX_FILE: outboxFile,
    SEARCH_SNAPSHOT_DIR: path.join(tmp, 'search-snapshots'),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    FACE_MODELS_DIR: path.join(ROOT, 'var', 'models'),
    FACE_JOB_TIMEOUT_MS: '15000',
    // Every test signs in from 127.0.0.1; the per-address limit has its own test with a low value.
    OPERATOR_LOGINS_PER_IP_PER_HOUR: '100000',
    // The timeout-and-withdrawal path of face jobs is what most tests exercise with no worker running;
    // the fail-fast gate (FAIL_FAST) has its own tests, which turn it on.
    FAIL_FAST: 'false',
    ...(opts.env ?? {}),
  };
  const configFor = (env: Record<string, string> = {}) => loadConfig({ ...baseEnv, ...env });
  const config = configFor();
  const logger = createLogger({ level: config.runtime.logLevel, name: 'test-web', destination: opts.logDestination });
  const deps = createDeps(config, { logger });
  const webProcess = await startWebProcess(deps, {
    poller: opts.poller ?? false,
    extraRoutes: opts.extraRoutes,
    scheduleRetention: opts.retentionSweep ?? false,
  });
  const web = webProcess.web;

  const faceWorkers: RunningWorker[] = [];
  const searchWorkers: RunningWorker[] = [];
  const startFaceWorker = async (env: Record<string, string> = {}) => {
    const { startFaceWorker: start } = await import('../../features/face/worker/worker.js');
    const w = await start(configFor(env), { logger: createLogger({ level: config.runtime.logLevel, name: 'test-face' }) });
    faceWorkers.push(w);
    return w;
  };
  const startSearchWorker = async (env: Record<string, string> = {}) => {
    const { startSearchWorker: start } = await import('../../features/search/worker/worker.js');
    // Only the first search worker serves the health port; the others use a free one.
    const extra: Record<string, string> = searchWorkers.length ? { SEARCH_HEALTH_PORT: String(await freePort()) } : {};
    const w = await start(configFor({ ...extra, ...env }), { logger: createLogger({ level: config.runtime.logLevel, name: 'test-search' }) });
    searchWorkers.push(w);
    return w;
  };
  if (opts.face) await startFaceWorker();
  for (let i = 0; i < (opts.search ?? 0); i++) await startSearchWorker();

  return {
    config,
    deps,
    web,
    url: web.url,
    db,
    faceWorkers,
    searchWorkers,
    outboxFile,
    env: baseEnv,
    configFor,
    startFaceWorker,
    startSearchWorker,
    stop: async () => {
      await webProcess.close();
      await Promise.allSettled([...faceWorkers, ...searchWorkers].map((w) => w.close()));
      await closeDeps(deps);
      await cleanRedis(prefix);
      await db.drop();
    },
  };
}

async function cleanRedis(prefix: string): Promise<void> {
  const r = createRedis(TEST_REDIS_URL, { enableOfflineQueue: true });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length) await r.del(...keys);
    } while (cursor !== '0');
  } catch {
    // Redis may be the thing a test stopped.
  } finally {
    r.disconnect();
  }
}

export interface UseHarnessHooks {
  /** Runs once the harness is up: what the file's tests share (accounts, enrolments, more servers). */
  ready?(h: Harness): Promise<void>;
  /** Runs before the harness stops (servers that use its database). */
  beforeStop?(h: Harness): Promise<void>;
  /** Runs after the harness has stopped (a private server it used). */
  afterStop?(): Promise<void>;
}

/**
 * A harness for the tests of one file: started before them, stopped after them (even when a test or
 * the start failed). Returns the harness object at once and fills it in when it has started, so the
 * tests read `h.url`, `h.deps` as usual.
 */
export function useHarness(
  test: TestFn,
  options: HarnessOptions | (() => HarnessOptions | Promise<HarnessOptions>) = {},
  hooks: UseHarnessHooks = {},
): Harness {
  const h = {} as Harness;
  let started = false;
  test.before(async () => {
    Object.assign(h, await startHarness(typeof options === 'function' ? await options() : options));
    started = true;
    await hooks.ready?.(h);
  });
  test.after.always(async () => {
    if (started) {
      await hooks.beforeStop?.(h);
      await h.stop();
    }
    await hooks.afterStop?.();
  });
  return h;
}
