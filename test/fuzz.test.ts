/**
 * The OpenAPI-driven fuzzer (test/support/fuzzer.ts), short run: a few thousand generated requests over
 * every route, with and without valid tokens of every kind, against the real service with real face and
 * search workers. No 5xx, the `{ error, message }` envelope on every 4xx, no hang. The long run
 * (20,000+) is `npm run chaos`. FUZZ_SEED replays a run; FUZZ_RUNS changes its length.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, startHarness, type Harness } from './helpers/harness.js';
import { runFuzz } from './support/fuzzer.js';
import { fuzzPrincipals } from './support/fuzz-principals.js';

let h: Harness;
test.before(async () => {
  // Low rate caps would only turn most requests into 429s; the fuzzer wants the routes behind them.
  h = await startHarness({ face: true, search: 1, env: { FACE_JOB_TIMEOUT_MS: '8000', FAIL_FAST: 'true' } });
});
test.after.always(async () => {
  await h?.stop();
});

const images = ['lfw/Bush_1.png', 'grace_hopper_a.jpg', 'no_face_fruits.jpg'].map((f) => readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', f)));

test('fuzzing every route: no 5xx, the error envelope on every 4xx, no hang', async (t) => {
  const runs = Number(process.env.FUZZ_RUNS ?? 2500);
  const seed = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : undefined;
  const report = await runFuzz({
    baseUrl: h.url,
    openapi: h.web.app.openapi,
    principals: () => fuzzPrincipals(h),
    runs,
    seed,
    images,
    concurrency: 6,
    hangMs: 15_000,
    extraPaths: ['/admin/queues', '/admin/queues/', '/console'],
  });
  t.log(
    `seed ${report.seed}: ${report.requests} requests in ${report.seconds.toFixed(1)} s (${report.notSent} not sendable), statuses ${JSON.stringify(report.byStatus)}, slowest ${Math.round(report.maxMs)} ms`,
  );
  t.log(
    `operations covered: ${Object.keys(report.byOperation).length}; slowest in total: ${Object.entries(report.msByOperation)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 6)
      .map(([k, v]) => `${k} ${v} ms`)
      .join(', ')}`,
  );
  for (const f of report.failures.slice(0, 10)) t.log(JSON.stringify(f));
  t.true(report.requests >= runs * 0.95, `${report.requests} of ${runs} requests sent`);
  t.is(report.failures.length, 0, `${report.failures.length} failures (replay with FUZZ_SEED=${report.seed})`);
  t.is(report.hangs, 0);
  // Every operation of the OpenAPI document was exercised.
  const operations = Object.entries(h.web.app.openapi.paths as Record<string, object>).flatMap(([p, m]) =>
    Object.keys(m).map((x) => `${x.toUpperCase()} ${p}`),
  );
  for (const op of operations) t.true((report.byOperation[op] ?? 0) > 0, `${op} was never fuzzed`);
  // The service is still up and answering.
  t.is((await fetch(`${h.url}/health`)).status, 200);
});
