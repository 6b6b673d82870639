/**
 * The `web` process (`npm run start:web`, Procfile `web`): the API and the registry simulator on PORT,
 * and the `upstream` and `webhooks` queues' workers when UPSTREAM_WORKER_IN_WEB (the default; see
 * processes/upstream/worker.ts for why). The tests start the same composition (test/helpers/harness.ts).
 */
import type { AddressInfo } from 'node:net';
import { closeDeps, createDeps, type AppDeps } from './web/deps.js';
import { startWeb, type RunningWeb, type StartWebOptions } from './web/http-server.js';
import { ensureFirstAdministrator } from '../features/staff/service.js';
import { config, logConfigAtStart } from './config.js';
import { isEntryFile, onShutdown, webStopMs } from '../platform/processes/shutdown.js';
import { startUpstreamWorker, type UpstreamWorkerOptions } from './upstream/worker.js';
import { startWebhookWorker } from '../features/webhooks/worker/worker.js';
import { WEBHOOK_METRICS } from '../features/webhooks/metrics.js';

export interface RunningWebProcess {
  web: RunningWeb;
  close(): Promise<void>;
}

/** What runs in a web process: the HTTP server and, when UPSTREAM_WORKER_IN_WEB, the upstream worker. */
export async function startWebProcess(deps: AppDeps, opts: StartWebOptions & UpstreamWorkerOptions = {}): Promise<RunningWebProcess> {
  const web = await startWeb(deps, opts);
  // Not awaited: the worker connects to Redis in the background, so the API serves (and /health
  // reports Redis) even while Redis is away.
  const upstream = deps.config.queues.upstreamWorkerInWeb
    ? startUpstreamWorker(deps.config, { db: deps.db, logger: deps.logger }, { scheduleRetention: opts.scheduleRetention }).catch((e: unknown) => {
        deps.logger.error({ err: e instanceof Error ? e.message : String(e) }, 'upstream worker failed to start');
        return undefined;
      })
    : undefined;
  // The webhook deliveries run beside the upstream worker (features/webhooks/worker/worker.ts says why).
  const webhooks = deps.config.queues.upstreamWorkerInWeb
    ? startWebhookWorker(deps.config, {
        db: deps.db,
        logger: deps.logger,
        keyRing: deps.keyRing,
        onAttempt: (report) => deps.metrics.counter(WEBHOOK_METRICS.attempts).inc({ outcome: report.outcome }),
      }).catch((e: unknown) => {
        deps.logger.error({ err: e instanceof Error ? e.message : String(e) }, 'webhook worker failed to start');
        return undefined;
      })
    : undefined;
  return {
    web,
    close: async () => {
      await web.close();
      await (await upstream)?.close();
      await (await webhooks)?.close();
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
