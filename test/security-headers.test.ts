/**
 * Strict-Transport-Security (platform/http/middleware/security-headers.ts): on answers to requests that
 * came over TLS, which behind a proxy means a trusted proxy's `X-Forwarded-Proto: https` (TRUST_PROXY),
 * never on plain http, and never on a forwarded header from a proxy that is not trusted.
 */
import test from 'ava';
import Koa from 'koa';
import type { AddressInfo } from 'node:net';
import { AppError } from '../platform/errors.js';
import { errorMiddleware } from '../platform/http/middleware/errors.js';
import { HSTS, securityHeaders } from '../platform/http/middleware/security-headers.js';

async function serve(trustProxy: boolean): Promise<{ url: string; close: () => void }> {
  const koa = new Koa({ proxy: trustProxy });
  // As processes/web/app.ts stacks them: the headers around the error renderer.
  koa.use(securityHeaders());
  koa.use(errorMiddleware());
  koa.use((ctx) => {
    if (ctx.path === '/missing') throw new AppError('not_found', 'nothing here');
    ctx.body = { ok: true };
  });
  koa.on('error', () => {});
  const server = koa.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
}

test('HSTS behind a trusted proxy that says https; not on plain http; not on an untrusted forwarded header', async (t) => {
  const trusted = await serve(true);
  const untrusted = await serve(false);
  t.teardown(() => (trusted.close(), untrusted.close()));
  const overTls = await fetch(`${trusted.url}/x`, { headers: { 'x-forwarded-proto': 'https' } });
  t.is(overTls.headers.get('strict-transport-security'), HSTS);
  t.regex(HSTS, /max-age=31536000/);
  // An error answer carries it too.
  const failed = await fetch(`${trusted.url}/missing`, { headers: { 'x-forwarded-proto': 'https' } });
  t.is(failed.status, 404);
  t.is(failed.headers.get('strict-transport-security'), HSTS);
  t.is((await fetch(`${trusted.url}/x`)).headers.get('strict-transport-security'), null, 'plain http');
  t.is((await fetch(`${trusted.url}/x`, { headers: { 'x-forwarded-proto': 'http' } })).headers.get('strict-transport-security'), null);
  t.is(
    (await fetch(`${untrusted.url}/x`, { headers: { 'x-forwarded-proto': 'https' } })).headers.get('strict-transport-security'),
    null,
    'TRUST_PROXY off: a forwarded header proves nothing',
  );
});
