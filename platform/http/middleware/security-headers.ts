/**
 * Headers every answer carries, whatever produced it (a route, an error, the queue dashboard, a 404):
 * - `X-Content-Type-Options: nosniff`: a browser never runs an answer as another type than declared;
 * - `Cache-Control: no-store` unless the answer set its own (the console's static files do): API
 *   answers carry personal data, tokens and biometric outcomes, which no shared or browser cache may
 *   keep (ASVS 5.0 V14.3);
 * - `Strict-Transport-Security` (one year, subdomains included) on an answer to a request that came over
 *   TLS: to this process directly, or, with TRUST_PROXY, through a proxy whose `X-Forwarded-Proto` says
 *   https (Koa's `ctx.secure` reads that header only when the proxy is trusted). A browser then never
 *   tries plain http again, so a network attacker cannot strip TLS from a console session. Never on a
 *   plain-http answer, where the header means nothing (RFC 6797 §7.2) and local development lives.
 * It wraps the error renderer, so the headers are set after an error body is written too.
 */
import type { Context, Next } from 'koa';

export const HSTS = 'max-age=31536000; includeSubDomains';

export function securityHeaders() {
  return async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next();
    } finally {
      ctx.set('X-Content-Type-Options', 'nosniff');
      if (!ctx.response.get('Cache-Control')) ctx.set('Cache-Control', 'no-store');
      if (ctx.secure) ctx.set('Strict-Transport-Security', HSTS);
    }
  };
}
