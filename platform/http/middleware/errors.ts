/**
 * The one place errors become HTTP: `{ error, message, details? }` (plus `outcome` on face outcomes).
 * Unknown errors are 500 `internal_error` with no internals in the body (they are logged).
 */
import type { Middleware } from 'koa';
import { AppError } from '../../errors.js';

/**
 * Error codes that mean "a backing service is away or changing hands", not "this request is wrong":
 * - network: the connection was refused, reset, timed out, or its host is unreachable (a host cut off);
 * - PostgreSQL class 08 (connection exception) and 57P01-57P03 (administrator shutdown, crash
 *   shutdown, cannot connect now: a server stopping, restarting or in recovery);
 * - PostgreSQL 25006 (read-only SQL transaction): during a fail-over a connection reaches the old
 *   primary after it turned standby (or a primary fenced read-only), and a write is refused there.
 */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  '57P01',
  '57P02',
  '57P03',
  '25006',
]);
const PG_CONNECTION_EXCEPTION = /^08[0-9A-Z]{3}$/;

/**
 * Messages of the same faults where the driver gives no code: node-postgres ("Connection terminated
 * unexpectedly", "... is not queryable", its connect timeout "timeout expired"), knex's pool, ioredis
 * (a closed connection, the offline queue, retries, commandTimeout, Sentinels all away), and Redis's
 * own replies during a fail-over: READONLY (a write reached a master demoted to replica), NOREPLICAS
 * (a master cut off from its replica refuses writes: `min-replicas-to-write`), MASTERDOWN, LOADING
 * (a node restarting), UNBLOCKED (a blocking command on a master that turned replica), TRYAGAIN.
 */
const UNAVAILABLE_MESSAGE =
  /Knex: Timeout acquiring a connection|Connection terminated|^timeout expired$|is not queryable|connect (ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT)|Stream isn't writeable|Connection is closed|enableOfflineQueue|Reached the max retries per request|^Command timed out$|All sentinels are unreachable|^(READONLY|NOREPLICAS|MASTERDOWN|LOADING|UNBLOCKED|TRYAGAIN|CLUSTERDOWN)\b|read-only transaction|terminating connection due to administrator command|the database system is (shutting down|starting up|in recovery mode|not yet accepting connections)/i;

/** The error itself and what it wraps (objection's `nativeError`, `cause`, an AggregateError's errors), a few levels deep. */
function errorChain(err: unknown, depth = 0): unknown[] {
  if (err == null || typeof err !== 'object' || depth > 4) return [];
  const e = err as { nativeError?: unknown; cause?: unknown; errors?: unknown; originalError?: unknown };
  const inner = [e.nativeError, e.cause, e.originalError, ...(Array.isArray(e.errors) ? e.errors : [])];
  return [err, ...inner.flatMap((i) => (i === err ? [] : errorChain(i, depth + 1)))];
}

/**
 * True when `err` is a backing service (PostgreSQL, Redis, the Sentinels) being away or failing
 * over, whatever wrapped it: the request is answered 503 with Retry-After, never 500.
 */
export function isDependencyUnavailable(err: unknown): boolean {
  return errorChain(err).some((x) => {
    const { code, message } = x as { code?: unknown; message?: unknown };
    if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || PG_CONNECTION_EXCEPTION.test(code))) return true;
    return typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message);
  });
}

/**
 * Maps infrastructure failures (PostgreSQL or Redis down, cut, or failing over) to 503, anything else
 * unknown to 500. A PostgreSQL connection cut between knex's acquire and the next statement
 * (pg_terminate_backend, a restart) surfaces as node-postgres' "Client has encountered a connection
 * error and is not queryable", and through objection as a DBError whose driver error (57P01, 57P03) is
 * its `nativeError` (test/pg-connection-cut.test.ts). node-postgres' own connect timeout says only
 * "timeout expired" (behind a proxy with no primary in service, during a fail-over: docs/deployment.md).
 * Each fail-over error is provoked for real in test/failover-errors.test.ts.
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const e = err as { code?: string; message?: string; name?: string; status?: number; expose?: boolean; httpCode?: number };
  const message = String(e?.message ?? '');
  if (isDependencyUnavailable(err)) {
    return new AppError('dependency_unavailable', 'A backing service (database or cache) is unavailable');
  }
  // Errors raised by Koa/co-body for malformed requests carry an exposed 4xx status.
  if (e?.expose && typeof e.status === 'number' && e.status >= 400 && e.status < 500) {
    if (e.status === 413) return new AppError('payload_too_large', 'The request body is too large');
    if (e.status === 415) return new AppError('unsupported_media_type', message || 'Unsupported content type');
    return new AppError('validation_failed', e.status === 400 ? 'The request body could not be parsed' : message, {
      details: { reason: message },
    });
  }
  return new AppError('internal_error', 'An unexpected error occurred');
}

const DEFAULT_RETRY_AFTER_SECONDS = 5;

export function errorMiddleware(): Middleware {
  return async (ctx, next) => {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new AppError('not_found', `No route for ${ctx.method} ${ctx.path}`);
      }
    } catch (err) {
      const appErr = toAppError(err);
      if (appErr.status >= 500) {
        ctx.state.log?.error(
          { err: err instanceof Error ? { message: err.message, stack: err.stack, code: (err as { code?: string }).code } : err, code: appErr.code },
          'request failed',
        );
      }
      ctx.status = appErr.status;
      // Every 503 says when to try again (a dependency that is down comes back, or a worker restarts).
      const retryAfter = appErr.retryAfter ?? (appErr.status === 503 ? DEFAULT_RETRY_AFTER_SECONDS : undefined);
      if (retryAfter !== undefined) ctx.set('Retry-After', String(Math.max(1, Math.ceil(retryAfter))));
      ctx.body = {
        ...(appErr.extra ?? {}),
        error: appErr.code,
        message: appErr.message,
        ...(appErr.details ? { details: appErr.details } : {}),
      };
    }
  };
}
