/**
 * The one place errors become HTTP: `{ error, message, details? }` (plus `outcome` on face outcomes).
 * Unknown errors are 500 `internal_error` with no internals in the body (they are logged).
 */
import type { Middleware } from 'koa';
import { AppError } from '../../errors.js';

const PG_CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', '57P01', '57P03', '08006', '08001', '08003']);

/**
 * Maps infrastructure failures (PostgreSQL or Redis down) to 503, anything else unknown to 500.
 * A PostgreSQL connection cut between knex's acquire and the next statement (pg_terminate_backend, a
 * restart) surfaces as node-postgres' "Client has encountered a connection error and is not queryable",
 * and through objection as a DBError whose driver error (57P01, 57P03) is its `nativeError`
 * (test/pg-connection-cut.test.ts). node-postgres' own connect timeout says only "timeout expired"
 * (behind a proxy with no primary in service, during a fail-over: docs/deployment.md).
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const e = err as { code?: string; message?: string; name?: string; status?: number; expose?: boolean; httpCode?: number };
  const message = String(e?.message ?? '');
  // objection wraps the driver's error (db-errors' DBError: no code of its own, the driver's in nativeError).
  const native = (err as { nativeError?: { code?: string } } | null)?.nativeError;
  if (
    (e?.code && PG_CONNECTION_CODES.has(e.code)) ||
    (native?.code && PG_CONNECTION_CODES.has(native.code)) ||
    /Knex: Timeout acquiring a connection|Connection terminated|^timeout expired$|is not queryable|connect ECONNREFUSED|Stream isn't writeable|Connection is closed|enableOfflineQueue|Reached the max retries per request/i.test(
      message,
    )
  ) {
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
