/** /health and the dependency gauge with Redis really stopped, then restarted (no service restart). */
import test from 'ava';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newOperator } from '../helpers/principals.js';
import { startPrivateRedis, type PrivateRedis } from '../../scripts/lib/private-services.js';

const POLL_MS = 400;
let redis: PrivateRedis;

const h = useHarness(
  test,
  async () => {
    redis = await startPrivateRedis();
    return { poller: true, env: { REDIS_URL: redis.url, DEPENDENCY_POLL_INTERVAL_MS: String(POLL_MS) } };
  },
  { afterStop: async () => redis?.stop() },
);

async function gauge(dependency: string): Promise<string | undefined> {
  const res = await client(h.url).get('/metrics');
  return new RegExp(`service_dependency_up\\{dependency="${dependency}"\\} (\\d)`).exec(res.text)?.[1];
}

async function eventually(t: { fail(msg: string): void }, what: string, check: () => Promise<boolean>, ms = 15_000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.fail(`${what} did not happen within ${ms} ms`);
  return false;
}

test.serial('Redis down: /health is 503 degraded and the gauge drops to 0 without /health being called; recovery is automatic', async (t) => {
  const api = client(h.url);
  await eventually(t, 'cache gauge 1', async () => (await gauge('cache')) === '1');
  t.is((await api.get('/health')).status, 200);

  await redis.stop();
  // The poller alone must move the gauge (no /health call in between).
  await eventually(t, 'cache gauge 0', async () => (await gauge('cache')) === '0');
  t.is(await gauge('db'), '1');

  const degraded = await api.get('/health');
  t.is(degraded.status, 503);
  t.is(degraded.body.status, 'degraded');
  t.false(degraded.body.dependencies.cache.up);
  t.true(degraded.body.dependencies.db.up);
  // The error text is for administrators (SPEC 12.3): the anonymous answer has `up` only.
  t.is(degraded.body.dependencies.cache.detail, undefined);
  const admin = await newOperator(h, { role: 'administrator' });
  const detailed = await api.get('/health', { token: admin.token });
  t.is(detailed.status, 503);
  t.is(typeof detailed.body.dependencies.cache.detail, 'string');

  await redis.start();
  await eventually(t, 'cache gauge back to 1', async () => (await gauge('cache')) === '1');
  await eventually(t, '/health back to 200', async () => (await api.get('/health')).status === 200);
});

test.serial('a dependency that is not db or cache does not make the service degraded', async (t) => {
  const res = await client(h.url).get('/health');
  t.is(res.status, 200);
  t.false(res.body.dependencies.face_engine.up);
  t.false(res.body.dependencies.vector_index.up);
});
