/**
 * Request id, a child logger per request, the access log line and the HTTP metrics.
 *
 * The access line names who called (the principal's type and id and its session id, set by the router
 * once the route admitted the caller; never a phone or a name) and from where (the client address as
 * TRUST_PROXY resolves it), so that an investigator can follow one session across requests.
 */
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from '../../logger.js';
import type { Metrics } from '../../metrics.js';
import type { AccessSubject } from '../principal.js';
import { clientIp } from '../client-address.js';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

export function requestContext(logger: Logger, metrics: Metrics, opts: { trustProxy?: boolean } = {}): Middleware {
  return async (ctx, next) => {
    const incoming = ctx.get('x-request-id');
    const requestId = REQUEST_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    // Only method and path: query strings, headers and bodies may carry secrets or biometrics.
    const log = logger.child({ requestId });
    ctx.state.log = log;
    const started = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      // The route template, not the concrete path, keeps label cardinality bounded.
      const routeLabel: string =
        ctx.state.routeTemplate ?? (ctx.status === 404 ? 'unmatched' : ctx.path.startsWith('/admin/queues') ? '/admin/queues' : 'unmatched');
      metrics.observeHttp(ctx.method, routeLabel, ctx.status, seconds);
      const subject = ctx.state.accessSubject as AccessSubject | undefined;
      const line = {
        method: ctx.method,
        route: routeLabel,
        status: ctx.status,
        ms: Math.round(seconds * 1000),
        ip: clientIp(ctx, opts.trustProxy ?? false),
        ...(subject ?? {}),
      };
      if (ctx.status >= 500) log.error(line, 'request');
      else log.info(line, 'request');
    }
  };
}
