/**
 * The `web` process (`npm run start:web`, Procfile `web`): the API and the registry simulator on PORT,
 * and the background queues' workers (the floor's retention sweep, every wing's `background` worker:
 * processes/wing-workers.ts) when UPSTREAM_WORKER_IN_WEB (the default; see processes/upstream/worker.ts
 * for why). The tests start the same composition (test/helpers/harness.ts).
 */
import type { AddressInfo } from 'node:net';
import { closeDeps, createDeps, type AppDeps } from './web/deps.js';
import { startWeb, type RunningWeb, type StartWebOptions } from './web/http-server.js';
import { ensureFirstAdministrator } from '../features/staff/service.js';
import { config, logConfigAtStart } from './config.js';
import { isEntryFile, onShutdown, webStopMs } from '../platform/processes/shutdown.js';
import type { UpstreamWorkerOptions } from './upstream/worker.js';
import { startBackgroundWorkers } from './wing-workers.js';

export interface RunningWebProcess {
  web: RunningWeb;
  close(): Promise<void>;
}

/** What runs in a web process: the HTTP server and, when UPSTREAM_WORKER_IN_WEB, the background queues' workers. */
export async function startWebProcess(deps: AppDeps, opts: StartWebOptions & UpstreamWorkerOptions = {}): Promise<RunningWebProcess> {
  const web = await startWeb(deps, opts);
  // Not awaited: the workers connect to Redis in the background, so the API serves (and /health
  // reports Redis) even while Redis is away; one that cannot start is logged, and the API serves on.
  const background = deps.config.queues.upstreamWorkerInWeb
    ? startBackgroundWorkers(
        { config: deps.config, logger: deps.logger, db: deps.db, keyRing: deps.keyRing, metrics: deps.metrics },
        {
          scheduleRetention: opts.scheduleRetention,
          onStartFailure: (name, e) =>
            deps.logger.error({ worker: name, err: e instanceof Error ? e.message : String(e) }, 'background worker failed to start'),
        },
      )
    : undefined;
  return {
    web,
    close: async () => {
      await web.close();
      await (await background)?.close();
    },
  };
}

if (isEntryFile(import.meta.url)) {
  const cfg = config();
  const deps = createDeps(cfg);
  logConfigAtStart(deps.logger, cfg, 'web');
  // ADMIN_IDENTIFIER / ADMIN_PASSWORD: the first administrator, when none is active yet.
  await ensureFirstAdministrator(deps);
  const running = await startWebProcess(deps);
  deps.logger.info({ url: `http://${cfg.http.host}:${(running.web.server.address() as AddressInfo).port}` }, 'web listening');
  // Drain first (SHUTDOWN_DRAIN_MS), then the upstream worker and the connections to PostgreSQL and
  // Redis; the grace period covers both.
  onShutdown(
    deps.logger,
    async () => {
      await running.close();
      await closeDeps(deps);
    },
    webStopMs(cfg),
    cfg.supervisor.pid,
  );
}
