import test from 'ava';
import { useHarness, startHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';

const h = useHarness(test);

test('GET /health reports all five dependencies and is 200 while db and cache are up', async (t) => {
  const res = await client(h.url).get('/health');
  t.is(res.status, 200);
  t.is(res.body.status, 'ok');
  t.deepEqual(Object.keys(res.body.dependencies).sort(), ['cache', 'db', 'face_engine', 'identity_registry', 'vector_index']);
  t.true(res.body.dependencies.db.up);
  t.true(res.body.dependencies.cache.up);
  // No face worker runs in this file: reported honestly, without making the service degraded.
  t.false(res.body.dependencies.face_engine.up);
});

test('GET /metrics exposes process metrics, HTTP metrics and the dependency gauge', async (t) => {
  await client(h.url).get('/health');
  const res = await client(h.url).get('/metrics');
  t.is(res.status, 200);
  t.regex(res.headers.get('content-type') ?? '', /text\/plain/);
  t.regex(res.text, /service_dependency_up\{dependency="db"\} 1/);
  t.regex(res.text, /service_dependency_up\{dependency="cache"\} 1/);
  t.regex(res.text, /service_dependency_up\{dependency="face_engine"\} 0/);
  t.regex(res.text, /process_cpu_user_seconds_total/);
  t.regex(res.text, /http_requests_total\{method="GET",route="\/health",status="200"\}/);
  t.regex(res.text, /http_request_duration_seconds_bucket/);
});

test('GET /models answers face_engine null while the engine is unreachable', async (t) => {
  const res = await client(h.url).get('/models');
  t.is(res.status, 200);
  t.is(res.body.face_engine, null);
  // Versions, not thresholds (SPEC 12.1: no oracle for someone trying faces).
  t.false('thresholds' in res.body);
  t.false(/threshold/i.test(res.text));
});

test('GET /settings/attestation-required is for administrators only', async (t) => {
  const api = client(h.url);
  const admin = await newOperator(h, { role: 'administrator' });
  const operator = await newOperator(h);
  const consumer = await newConsumer(h);
  const ok = await api.get('/settings/attestation-required', { token: admin.token });
  t.is(ok.status, 200);
  t.deepEqual(ok.body, { attestationRequired: true });
  t.is((await api.get('/settings/attestation-required')).status, 401);
  t.is((await api.get('/settings/attestation-required', { token: consumer.token })).status, 401);
  const asOperator = await api.get('/settings/attestation-required', { token: operator.token });
  t.is(asOperator.status, 403);
  t.is(asOperator.body.error, 'forbidden');
});

test('PATCH /settings/attestation-required is always 403 setting_immutable', async (t) => {
  const api = client(h.url);
  const admin = await newOperator(h, { role: 'administrator' });
  const consumer = await newConsumer(h);
  for (const opts of [
    {},
    { token: admin.token, json: { attestationRequired: false } },
    { token: consumer.token, json: {} },
    { rawBody: 'garbage', headers: { 'content-type': 'text/plain' } },
  ]) {
    const res = await api.patch('/settings/attestation-required?x=1', opts);
    t.is(res.status, 403);
    t.is(res.body.error, 'setting_immutable');
    t.is(typeof res.body.message, 'string');
  }
  t.deepEqual((await api.get('/settings/attestation-required', { token: admin.token })).body, { attestationRequired: true });
});

test('an unknown route answers the error envelope', async (t) => {
  const res = await client(h.url).get('/no/such/route');
  t.is(res.status, 404);
  t.is(res.body.error, 'not_found');
  t.is(typeof res.body.message, 'string');
  t.truthy(res.headers.get('x-request-id'));
});

test('a registry answering 5xx is reported down without making the service degraded', async (t) => {
  const faulty = await startHarness({ env: { REGISTRY_SIM_FAULT: 'error' } });
  try {
    // The detail is for administrators (SPEC 12.3).
    const admin = await newOperator(faulty, { role: 'administrator' });
    const res = await client(faulty.url).get('/health', { token: admin.token });
    t.is(res.status, 200);
    t.false(res.body.dependencies.identity_registry.up);
    t.regex(String(res.body.dependencies.identity_registry.detail), /500/);
  } finally {
    await faulty.stop();
  }
});
