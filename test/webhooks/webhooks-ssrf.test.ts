/**
 * The SSRF guard of webhook deliveries (features/webhooks/sender.ts), with WEBHOOK_ALLOW_PRIVATE off as in
 * production: only https, only public addresses, checked against what the name resolves to when the
 * attempt is sent, no redirect followed. A real receiver listens on loopback: it must never be reached.
 */
import test from 'ava';
import { WebhooksRepository } from '../../features/webhooks/repository.js';
import { newWebhookSecret, sealWebhookSecret } from '../../features/webhooks/secrets.js';
import { checkWebhookUrl, isPublicAddress, REFUSED_ADDRESS, sendWebhook } from '../../features/webhooks/sender.js';
import { attemptDelivery } from '../../features/webhooks/worker/delivery.js';
import { ConfigError, loadConfig } from '../../processes/config.js';
import { parsePrivateCidrs } from '../../features/webhooks/settings.js';
import { keyRingOf } from '../../platform/keys/templates.js';
import { recordUserDeleted } from '../helpers/events.js';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newOperator } from '../helpers/principals.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

let receiver: WebhookReceiver;
// The harness's own worker is left out (UPSTREAM_WORKER_IN_WEB=false): this file runs attempts itself.
const h = useHarness(
  test,
  async () => {
    receiver = await startWebhookReceiver();
    return { env: { WEBHOOK_ALLOW_PRIVATE: 'false', UPSTREAM_WORKER_IN_WEB: 'false' } };
  },
  { afterStop: () => receiver.close() },
);

const strict = { timeoutMs: 2000, allowPrivate: false };

test('production default: private targets are not allowed', (t) => {
  t.false(
    loadConfig({
      NODE_ENV: 'production',
      JWT_PRIVATE_KEY: 'k',
      BIOMETRIC_KEYS: `k1:${Buffer.alloc(32, 1).toString('base64')}`,
      LINK_NUMBER_HASH_KEY: Buffer.alloc(32, 9).toString('base64'),
      SMS_WEBHOOK_URL: 'https://x',
      REGISTRY_URL: 'https://r.example',
      REDIS_URL: 'redis://:a-redis-password@redis.internal:6379',
      METRICS_TOKEN: 'a-metrics-token-of-at-least-32-characters',
      OTP_SECRET: 'an-otp-secret-of-at-least-32-characters',
    }).webhooks.allowPrivate,
  );
  t.true(loadConfig({ NODE_ENV: 'development' }).webhooks.allowPrivate);
});

test('address classification', (t) => {
  for (const a of [
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::1',
    '::',
    'fe80::1',
    'fd00::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '64:ff9b::a00:1',
    '224.0.0.1',
  ]) {
    t.false(isPublicAddress(a), a);
  }
  for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111']) t.true(isPublicAddress(a), a);
});

test('create-time check: https only, no credentials, no private literal', (t) => {
  t.throws(() => checkWebhookUrl('http://example.com/hook', strict), { message: /https/ });
  t.throws(() => checkWebhookUrl('https://user:pw@example.com/hook', strict), { message: /credentials/ });
  for (const u of [
    'https://127.0.0.1/x',
    'https://127.1/x',
    'https://0x7f000001/x',
    'https://[::1]/x',
    'https://[::ffff:127.0.0.1]/x',
    'https://169.254.169.254/latest',
  ]) {
    t.throws(() => checkWebhookUrl(u, strict), { message: /public/ }, u);
  }
  t.notThrows(() => checkWebhookUrl('https://hooks.example.com/x', strict));
  t.notThrows(() => checkWebhookUrl('http://127.0.0.1:9/x', { allowPrivate: true }));
});

test('WEBHOOK_PRIVATE_CIDRS: the explicit allow-list of private receivers, still https only', (t) => {
  const policy = { allowPrivate: false, privateCidrs: parsePrivateCidrs('10.20.0.0/16, fd00:20::/32') };
  t.notThrows(() => checkWebhookUrl('https://10.20.3.4/hook', policy));
  t.notThrows(() => checkWebhookUrl('https://[fd00:20::7]/hook', policy));
  t.throws(() => checkWebhookUrl('https://10.21.0.1/hook', policy), { message: /public/ });
  t.throws(() => checkWebhookUrl('https://127.0.0.1/hook', policy), { message: /public/ });
  t.throws(() => checkWebhookUrl('http://10.20.3.4/hook', policy), { message: /https/ });
  const err = t.throws(() => loadConfig({ NODE_ENV: 'development', WEBHOOK_PRIVATE_CIDRS: '10.20.0.0/16,10.30.0.0' }), { instanceOf: ConfigError });
  t.regex((err as ConfigError).problems.join('\n'), /WEBHOOK_PRIVATE_CIDRS/);
});

test('send-time check: a name that resolves to loopback is refused, the receiver never reached', async (t) => {
  const port = new URL(receiver.url).port;
  const res = await sendWebhook(`https://localhost:${port}/guarded`, {}, '{}', strict);
  t.is(res.status, null);
  // A fixed text: what the name resolved to would map the internal network for whoever reads the log.
  t.is(res.error, REFUSED_ADDRESS);
  t.notRegex(res.error ?? '', /127\.0\.0\.1|::1|resolves/);
  // Inside WEBHOOK_PRIVATE_CIDRS the name passes the guard (the TLS handshake then fails: the receiver is plain http).
  const allowed = await sendWebhook(`https://localhost:${port}/guarded`, {}, '{}', { ...strict, privateCidrs: parsePrivateCidrs('127.0.0.0/8,::1/128') });
  t.is(allowed.status, null);
  t.notRegex(allowed.error ?? '', /refused/);
  const plain = await sendWebhook(`${receiver.url}/guarded`, {}, '{}', strict);
  t.regex(plain.error ?? '', /refused: only https/);
  t.is(receiver.on('/guarded').length, 0);
});

test('redirects are not followed; the timeout bounds an attempt', async (t) => {
  const target = await startWebhookReceiver();
  const server = http.createServer((req, res) => {
    if (req.url === '/slow') return; // never answers
    res.writeHead(302, { location: `${target.url}/redirected` }).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const redirected = await sendWebhook(`${base}/hook`, {}, '{}', { timeoutMs: 2000, allowPrivate: true });
    t.is(redirected.status, 302);
    const slow = await sendWebhook(`${base}/slow`, {}, '{}', { timeoutMs: 300, allowPrivate: true });
    t.is(slow.status, null);
    t.regex(slow.error ?? '', /timeout after 300 ms/);
    t.true(slow.durationMs < 2000);
    t.is(target.on('/redirected').length, 0);
  } finally {
    server.closeAllConnections();
    server.close();
    await target.close();
  }
});

test('the API refuses a private endpoint URL with 400 when private targets are off', async (t) => {
  const admin = await newOperator(h, { role: 'administrator' });
  const res = await client(h.url).post('/webhooks/endpoints', { token: admin.token, json: { url: `${receiver.url}/x`, events: ['user.deleted'] } });
  t.is(res.status, 400);
  t.is(res.body.error, 'validation_failed');
  t.regex(res.body.message, /https/);
});

test('an attempt to an endpoint that now resolves privately is logged failed and retried, never sent', async (t) => {
  const repo = new WebhooksRepository(h.deps.db);
  const key = keyRingOf(h.config);
  const id = randomUUID();
  const port = new URL(receiver.url).port;
  // Written as if its name had resolved publicly when it was registered.
  await repo.insertEndpoint({
    id,
    url: `https://localhost:${port}/rebound`,
    description: null,
    events: ['user.deleted'],
    secretSealed: sealWebhookSecret(key, id, newWebhookSecret()),
    createdBy: null,
  });
  await recordUserDeleted(h.deps.db, randomUUID());
  const [deliveryId] = await repo.dispatchEvents(10);
  const report = await attemptDelivery(
    repo,
    { retryScheduleSeconds: [60], timeoutMs: 2000, allowPrivate: false, keyRing: key },
    { deliveryId: deliveryId!, attempt: 1 },
  );
  t.like(report, { outcome: 'retry', responseStatus: null });
  const [attempt] = (await repo.attemptPage(id, { page: 1, pageSize: 10 })).rows;
  t.like(attempt, { status: 'failed', responseStatus: null });
  t.is(attempt!.error, REFUSED_ADDRESS, 'the delivery log keeps a fixed text, never what the name resolved to');
  t.is(receiver.on('/rebound').length, 0);
  // The same job again does nothing: attempt 1 was made.
  t.is(
    await attemptDelivery(repo, { retryScheduleSeconds: [60], timeoutMs: 2000, allowPrivate: false, keyRing: key }, { deliveryId: deliveryId!, attempt: 1 }),
    undefined,
  );
});
