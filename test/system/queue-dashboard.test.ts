/** Bull Board at /admin/queues: administrators (through the cookie) only. */
import test from 'ava';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { CSP_RECORDER, cspViolations, launchChromium } from '../helpers/browser.js';

const h = useHarness(test);

function cookieOf(res: { headers: Headers }): string {
  const raw = res.headers.get('set-cookie') ?? '';
  return raw.split(';')[0]!;
}

test('an administrator opens the dashboard with a short-lived HttpOnly SameSite cookie and sees every queue', async (t) => {
  const api = client(h.url);
  const admin = await newOperator(h, { role: 'administrator' });
  const session = await api.post('/admin/queues/session', { token: admin.token });
  t.is(session.status, 204);
  const setCookie = session.headers.get('set-cookie') ?? '';
  t.regex(setCookie, /httponly/i);
  t.regex(setCookie, /samesite=strict/i);
  t.regex(setCookie, /path=\/admin\/queues/i);
  const page = await api.get('/admin/queues', { headers: { cookie: cookieOf(session) } });
  t.is(page.status, 200);
  t.regex(page.text, /<html/i);
  // The board's page: scripts from this origin only, never framed.
  const csp = page.headers.get('content-security-policy') ?? '';
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /script-src 'self'(;|$)/);
  t.regex(csp, /frame-ancestors 'none'/);
  t.is(page.headers.get('x-frame-options'), 'DENY');
  const queues = await api.get('/admin/queues/api/queues?activeQueue=liveness&page=1&jobsPerPage=10', { headers: { cookie: cookieOf(session) } });
  t.is(queues.status, 200);
  const names = (queues.body.queues as { name: string }[]).map((q) => q.name).sort();
  t.deepEqual(names, ['bank-account-confirmations', 'embed', 'light', 'liveness', 'search', 'upstream', 'webhooks']);
});

test('anonymous callers, consumers, operators and forged cookies are refused', async (t) => {
  const api = client(h.url);
  const anon = await api.get('/admin/queues');
  t.is(anon.status, 401);
  t.is(anon.body.error, 'unauthorized');
  t.is((await api.get('/admin/queues/api/queues')).status, 401);

  const consumer = await newConsumer(h);
  t.is((await api.post('/admin/queues/session', { token: consumer.token })).status, 401);
  const operator = await newOperator(h);
  const opSession = await api.post('/admin/queues/session', { token: operator.token });
  t.is(opSession.status, 403);
  t.is(opSession.headers.get('set-cookie'), null);

  // A bearer token is not a cookie, and a cookie must be one we signed for the dashboard.
  t.is((await api.get('/admin/queues', { token: (await newOperator(h, { role: 'administrator' })).token })).status, 401);
  t.is((await api.get('/admin/queues', { headers: { cookie: `faceid_admin_ui=${consumer.token}` } })).status, 401);
});

test('the cookie stops working once the administrator is deactivated or logged out', async (t) => {
  const api = client(h.url);
  const admin = await newOperator(h, { role: 'administrator' });
  const cookie = cookieOf(await api.post('/admin/queues/session', { token: admin.token }));
  t.is((await api.get('/admin/queues', { headers: { cookie } })).status, 200);
  await h.deps.db('operators').where({ id: admin.operatorId }).update({ status: 'deactivated' });
  t.is((await api.get('/admin/queues', { headers: { cookie } })).status, 403);

  const other = await newOperator(h, { role: 'administrator' });
  const cookie2 = cookieOf(await api.post('/admin/queues/session', { token: other.token }));
  await h.deps.db('sessions').where({ id: other.sessionId }).update({ revokedAt: new Date() });
  t.is((await api.get('/admin/queues', { headers: { cookie: cookie2 } })).status, 401);
});

test('QUEUE_DASHBOARD_READ_ONLY (the production default): the board shows the queues and refuses every change with 405', async (t) => {
  const { startHarness } = await import('../helpers/harness.js');
  const { loadConfig } = await import('../../processes/config.js');
  t.true(
    loadConfig({
      JWT_PRIVATE_KEY: 'k',
      BIOMETRIC_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
      LINK_NUMBER_HASH_KEY: Buffer.alloc(32, 9).toString('base64'),
      SMS_WEBHOOK_URL: 'https://sms.example/send',
      REGISTRY_URL: 'https://registry.example/v1',
      REDIS_URL: 'redis://:a-redis-password@redis.internal:6379',
      METRICS_TOKEN: 'a-metrics-token-of-at-least-32-characters',
      OTP_SECRET: 'an-otp-secret-of-at-least-32-characters',
    }).queueDashboard.readOnly,
    'on in production',
  );
  t.false(loadConfig({ NODE_ENV: 'development' }).queueDashboard.readOnly);
  const ro = await startHarness({ env: { QUEUE_DASHBOARD_READ_ONLY: 'true' } });
  try {
    const api = client(ro.url);
    const admin = await newOperator(ro, { role: 'administrator' });
    const cookie = cookieOf(await api.post('/admin/queues/session', { token: admin.token }));
    const queues = await api.get('/admin/queues/api/queues?activeQueue=liveness&page=1&jobsPerPage=10', { headers: { cookie } });
    t.is(queues.status, 200);
    t.true((queues.body.queues as { readOnlyMode: boolean }[]).every((q) => q.readOnlyMode));
    for (const action of ['pause', 'clean/completed', 'retry/failed']) {
      const res = await fetch(`${ro.url}/admin/queues/api/queues/liveness/${action}`, { method: 'PUT', headers: { cookie } });
      t.is(res.status, 405, action);
    }
    t.false(await ro.deps.jobs.queue('liveness').isPaused());
  } finally {
    await ro.stop();
  }
});

test('the board works in a browser under its Content-Security-Policy: nothing it needs is blocked', async (t) => {
  t.timeout(120_000);
  const admin = await newOperator(h, { role: 'administrator' });
  const session = await client(h.url).post('/admin/queues/session', { token: admin.token });
  const [name, value] = cookieOf(session).split('=') as [string, string];
  const browser = await launchChromium();
  try {
    const context = await browser.newContext({ baseURL: h.url });
    await context.addInitScript(CSP_RECORDER);
    await context.addCookies([{ name, value, url: h.url }]);
    const page = await context.newPage();
    await page.goto('/admin/queues');
    // The React app ran (scripts from this origin) and fetched the queues (connect-src 'self').
    await page.getByText('liveness').first().waitFor({ timeout: 60_000 });
    // Only the third-party font stylesheet is refused, on purpose (which also shows the recorder works).
    const violations = await cspViolations(page);
    t.true(violations.some((v) => v.includes('fonts.googleapis.com')));
    t.deepEqual(
      violations.filter((v) => !v.includes('fonts.googleapis.com')),
      [],
    );
  } finally {
    await browser.close();
  }
});
