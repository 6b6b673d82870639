/**
 * Headers every answer carries, whatever produced it (a route, an error, the queue dashboard, a 404):
 * - `X-Content-Type-Options: nosniff`: a browser never runs an answer as another type than declared;
 * - `Cache-Control: no-store` unless the answer set its own (the console's static files do): API
 *   answers carry personal data, tokens and biometric outcomes, which no shared or browser cache may
 *   keep (ASVS 5.0 V14.3).
 * It wraps the error renderer, so the headers are set after an error body is written too.
 */
import type { Context, Next } from 'koa';

export function securityHeaders() {
  return async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next();
    } finally {
      ctx.set('X-Content-Type-Options', 'nosniff');
      if (!ctx.response.get('Cache-Control')) ctx.set('Cache-Control', 'no-store');
    }
  };
}
