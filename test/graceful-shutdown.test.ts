/**
 * The web process drains on shutdown. It stops accepting connections, answers the
 * requests already in flight (up to the drain timeout), then closes; before, every connection was cut
 * at once and the clients got a reset.
 */
import test from 'ava';
import { Type } from '@sinclair/typebox';
import { route } from '../platform/http/route-table.js';
import { startHarness, type Harness } from './helpers/harness.js';

const slowRoute = route({
  method: 'GET',
  path: '/_test/slow',
  operationId: 'testSlow',
  tag: 'Test',
  summary: 'answers after ?ms milliseconds',
  auth: 'none',
  query: Type.Object({ ms: Type.Integer({ minimum: 0, maximum: 10_000 }) }),
  responses: { 200: { description: 'done', schema: Type.Object({ waited: Type.Integer() }) } },
  handler: async ({ query }) => {
    await new Promise((r) => setTimeout(r, query.ms));
    return { body: { waited: query.ms } };
  },
});

const harnesses: Harness[] = [];
test.after.always(async () => {
  await Promise.allSettled(harnesses.map((h) => h.stop()));
});

async function harness(): Promise<Harness> {
  const h = await startHarness({ extraRoutes: [slowRoute] });
  harnesses.push(h);
  return h;
}

/** Waits (bounded) until the server holds `n` requests: a loaded machine may be slow to deliver them. */
async function untilInFlight(h: Harness, n: number): Promise<void> {
  for (let i = 0; i < 200 && h.web.inFlight() < n; i++) await new Promise((r) => setTimeout(r, 50));
}

const outcome = (p: Promise<Response>) =>
  p.then(
    async (r) => ({ status: r.status, body: (await r.json()) as { waited?: number } }),
    (e: Error) => ({ status: 0, error: String((e.cause as Error | undefined)?.message ?? e.message) }),
  );

test('in-flight requests are answered, new connections are refused, then the server closes', async (t) => {
  const h = await harness();
  const inFlight = Array.from({ length: 5 }, () => outcome(fetch(`${h.url}/_test/slow?ms=3000`)));
  await untilInFlight(h, 5);
  t.is(h.web.inFlight(), 5);
  const started = Date.now();
  const closing = h.web.close(10_000);
  await new Promise((r) => setTimeout(r, 100));
  const late = await outcome(fetch(`${h.url}/health`));
  t.is(late.status, 0, 'a new connection is refused while draining');
  const answers = await Promise.all(inFlight);
  t.deepEqual(
    answers.map((a) => a.status),
    [200, 200, 200, 200, 200],
    JSON.stringify(answers),
  );
  await closing;
  const took = Date.now() - started;
  t.true(took >= 200 && took < 8000, `closed after ${took} ms`);
});

test('past the drain timeout the remaining connections are closed', async (t) => {
  const h = await harness();
  const slow = outcome(fetch(`${h.url}/_test/slow?ms=5000`));
  await untilInFlight(h, 1);
  const started = Date.now();
  await h.web.close(500);
  const took = Date.now() - started;
  t.true(took >= 450 && took < 2500, `closed after ${took} ms`);
  t.is((await slow).status, 0, 'the request still running past the drain was cut');
});
