/** Starting and stopping the HTTP server of a web process (processes/web.ts; also the tests, in-process). */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, type App } from './app.js';
import { createEnvelopedServer } from './http-envelope.js';
import type { AppDeps } from './deps.js';
import type { AnyRoute } from './route-table.js';
import { pruneExpiredRefreshTokens } from './services/session-service.js';

export interface RunningWeb {
  app: App;
  server: Server;
  url: string;
  close(): Promise<void>;
}

export interface StartWebOptions {
  port?: number;
  host?: string;
  /** Start the background dependency poller (default true). */
  poller?: boolean;
  /** Routes mounted beside the real ones (tests of the framework itself). */
  extraRoutes?: AnyRoute[];
}

export async function startWeb(deps: AppDeps, opts: StartWebOptions = {}): Promise<RunningWeb> {
  const app = createApp(deps, { extraRoutes: opts.extraRoutes });
  // Node's own refusals (431, 408, malformed HTTP...) carry the error envelope too: api/http-envelope.ts.
  const server = createEnvelopedServer(app.koa.callback());
  server.listen(opts.port ?? deps.config.port, opts.host ?? deps.config.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  // Uploads are bounded; a slow client must not hold a socket forever.
  server.requestTimeout = 60_000;
  server.headersTimeout = 15_000;
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  if (opts.poller !== false) deps.health.startPoller(deps.config.dependencyPollIntervalMs);
  // Housekeeping: long-expired refresh-token rows go, hourly (every web replica may run it; it is idempotent).
  const prune = () => pruneExpiredRefreshTokens(deps.db).catch((e: unknown) => deps.logger.debug({ err: (e as Error).message }, 'refresh-token pruning failed'));
  const pruneTimer = setInterval(prune, 3600_000);
  pruneTimer.unref();
  return {
    app,
    server,
    url,
    close: async () => {
      await new Promise<void>((resolve) => {
        deps.health.stopPoller();
        clearInterval(pruneTimer);
        server.closeAllConnections?.();
        server.close(() => resolve());
      });
    },
  };
}
