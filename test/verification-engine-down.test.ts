/** With no face worker running, /identify answers 503 within the timeout and still logs the call. */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT, useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newOperator } from './helpers/principals.js';
import { identifyWithFixture, jobsLeft } from './helpers/face-path.js';

const TIMEOUT_MS = 1200;
// A low pixel limit too: the API refuses an oversized image itself, before any job.
const h = useHarness(test, { env: { FACE_JOB_TIMEOUT_MS: String(TIMEOUT_MS), MAX_IMAGE_PIXELS: '100000' } });

test('identify with the face engine down: 503 face_engine_unavailable in time, one SearchLog row, nothing left queued', async (t) => {
  const operator = await newOperator(h);
  const { res, elapsed } = await identifyWithFixture(h, operator.token);
  t.is(res.status, 503);
  t.is(res.body.error, 'face_engine_unavailable');
  t.true(elapsed < TIMEOUT_MS + 2000, `answered after ${elapsed} ms`);
  const rows = await h.deps.db('searchLogs').where({ operatorId: operator.operatorId });
  t.is(rows.length, 1);
  t.is(rows[0].outcome, 'face_engine_unavailable');
  t.is(await jobsLeft(h, 'liveness'), 0);
});

test('an image over MAX_IMAGE_PIXELS is 400 invalid_image, answered by the API without the engine', async (t) => {
  const operator = await newOperator(h);
  const res = await client(h.url).post('/identify', {
    token: operator.token,
    form: { attestation: 'true', file: { data: readFileSync(path.join(ROOT, 'test/fixtures/faces/grace_hopper_a.jpg')), filename: 'p.jpg' } },
  });
  t.is(res.status, 400);
  t.is(res.body.error, 'invalid_image');
  t.regex(res.body.message, /pixel/);
});
