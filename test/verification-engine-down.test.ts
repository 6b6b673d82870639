/** With no face worker running, /identify answers 503 within the timeout and still logs the call. */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, startHarness, type Harness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newOperator } from './helpers/principals.js';

const TIMEOUT_MS = 1200;
let h: Harness;
test.before(async () => {
  h = await startHarness({ env: { FACE_JOB_TIMEOUT_MS: String(TIMEOUT_MS) } });
});
test.after.always(async () => {
  await h?.stop();
});

test('identify with the face engine down: 503 face_engine_unavailable in time, one SearchLog row, nothing left queued', async (t) => {
  const operator = await newOperator(h);
  const started = Date.now();
  const res = await client(h.url).post('/identify', {
    token: operator.token,
    form: { attestation: 'true', file: { data: readFileSync(path.join(ROOT, 'test/fixtures/faces/lfw/Bush_1.png')), filename: 'p.png', type: 'image/png' } },
  });
  const elapsed = Date.now() - started;
  t.is(res.status, 503);
  t.is(res.body.error, 'face_engine_unavailable');
  t.true(elapsed < TIMEOUT_MS + 2000, `answered after ${elapsed} ms`);
  const rows = await h.deps.db('searchLogs').where({ operatorId: operator.operatorId });
  t.is(rows.length, 1);
  t.is(rows[0].outcome, 'face_engine_unavailable');
  const counts = await h.deps.jobs.counts('liveness');
  t.is(counts.waiting + counts.active + counts.delayed + counts.prioritized, 0);
});
