/** The Koa application: request context, errors, the queue dashboard, then the table-driven router. */
import Koa from 'koa';
import { readFileSync } from 'node:fs';
import type { AppDeps } from './deps.js';
import { consoleStatic } from '../../platform/http/middleware/console-static.js';
import { errorMiddleware } from '../../platform/http/middleware/errors.js';
import { requestContext } from '../../platform/http/middleware/request-context.js';
import { securityHeaders } from '../../platform/http/middleware/security-headers.js';
import { buildOpenApi } from '../../platform/http/openapi.js';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { adminQueuesMiddleware } from '../../features/system/queue-dashboard.js';
import { allRoutes } from './routes.js';
import { buildRouter } from '../../platform/http/router.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface App {
  koa: Koa;
  routes: AnyRoute[];
  openapi: Record<string, unknown>;
}

export async function createApp(deps: AppDeps, opts: { extraRoutes?: AnyRoute[] } = {}): Promise<App> {
  const routes = [...(await allRoutes(deps)), ...(opts.extraRoutes ?? [])];
  let openapi: Record<string, unknown> = {};
  routes.push(
    route({
      method: 'GET',
      path: '/openapi.json',
      operationId: 'getOpenApi',
      tag: 'System',
      summary: 'This document',
      auth: 'none',
      responses: { 200: { description: 'OpenAPI 3.1 document' } },
      handler: async function getOpenApi() {
        return { body: openapi };
      },
    }),
  );
  openapi = buildOpenApi(routes, { version: VERSION });

  const koa = new Koa({ proxy: deps.config.http.trustProxy });
  koa.use(requestContext(deps.logger, deps.metrics, { trustProxy: deps.config.http.trustProxy }));
  koa.use(securityHeaders());
  koa.use(errorMiddleware());
  koa.use(adminQueuesMiddleware(deps));
  koa.use(consoleStatic());
  koa.use(buildRouter(routes, deps).routes());
  // Errors are rendered by errorMiddleware; keep Koa's own handler from printing stack traces.
  koa.on('error', () => {});
  return { koa, routes, openapi };
}
