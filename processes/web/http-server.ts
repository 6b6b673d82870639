/** Starting and stopping the HTTP server of a web process (processes/web.ts; also the tests, in-process). */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, type App } from './app.js';
import { createEnvelopedServer } from '../../platform/http/http-envelope.js';
import type { AppDeps } from './deps.js';
import type { AnyRoute } from '../../platform/http/route-table.js';

export interface RunningWeb {
  app: App;
  server: Server;
  url: string;
  /** Requests received and not yet answered. */
  inFlight(): number;
  close(drainMs?: number): Promise<void>;
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
  const app = await createApp(deps, { extraRoutes: opts.extraRoutes });
  // In-flight requests, counted at the socket level, for the drain on shutdown.
  let inFlight = 0;
  let draining = false;
  const settled: (() => void)[] = [];
  const handle = app.koa.callback();
  // Node's own refusals (431, 408, malformed HTTP...) carry the error envelope too: platform/http/http-envelope.ts.
  const server = createEnvelopedServer((req, res) => {
    inFlight++;
    // While draining, every answer closes its connection: a keep-alive client moves to another process.
    if (draining) res.setHeader('Connection', 'close');
    res.once('close', () => {
      inFlight--;
      if (inFlight === 0) for (const f of settled.splice(0)) f();
    });
    void handle(req, res);
  });
  server.listen(opts.port ?? deps.config.http.port, opts.host ?? deps.config.http.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  // Uploads are bounded; a slow client must not hold a socket forever.
  server.requestTimeout = 60_000;
  server.headersTimeout = 15_000;
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  if (opts.poller !== false) deps.health.startPoller(deps.config.runtime.dependencyPollIntervalMs);
  return {
    app,
    server,
    url,
    inFlight: () => inFlight,
    /**
     * Graceful: stop accepting, close idle keep-alive connections, let in-flight requests be answered
     * (up to `drainMs`, default SHUTDOWN_DRAIN_MS), then close whatever is left.
     */
    close: async (drainMs = deps.config.http.shutdownDrainMs) => {
      draining = true;
      deps.health.stopPoller();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections?.();
      if (inFlight > 0) {
        const started = Date.now();
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, drainMs);
          settled.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        deps.logger.info(
          { drainedMs: Date.now() - started, leftInFlight: inFlight },
          inFlight ? 'drain timeout: closing the remaining connections' : 'drained',
        );
      }
      server.closeAllConnections?.();
      await closed;
    },
  };
}
