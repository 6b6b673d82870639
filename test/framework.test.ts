/**
 * The request pipeline every route shares: error envelope, AJV validation of body, query, params and
 * multipart fields, the upload limit, content types. Exercised through routes mounted on the real app.
 */
import { Type } from '@sinclair/typebox';
import test from 'ava';
import { route } from '../platform/http/route-table.js';
import { AppError } from '../platform/errors.js';
import { Strict } from '../platform/http/schemas.js';
import { useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer, newOperator } from './helpers/principals.js';

const MAX_UPLOAD = 64 * 1024;

const probeRoutes = [
  route({
    method: 'POST',
    path: '/_test/things/{id}',
    operationId: 'testThings',
    tag: 'Test',
    summary: 'body + query + params',
    auth: 'none',
    params: Type.Object({ id: Type.Integer({ minimum: 1 }) }, Strict),
    query: Type.Object({ verbose: Type.Optional(Type.Boolean()) }, Strict),
    body: Type.Object({ name: Type.String({ minLength: 1 }), count: Type.Integer() }, Strict),
    responses: { 200: { description: 'echo' } },
    handler: async ({ body, query, params }) => ({ body: { body, query, params } }),
  }),
  route({
    method: 'POST',
    path: '/_test/upload',
    operationId: 'testUpload',
    tag: 'Test',
    summary: 'multipart',
    auth: 'none',
    multipart: { fields: Type.Object({ note: Type.String({ maxLength: 10 }) }, Strict), files: { file: { required: true, description: 'a file' } } },
    responses: { 200: { description: 'sizes' } },
    handler: async ({ fields, files }) => ({ body: { note: fields.note, size: files.file?.size } }),
  }),
  route({
    method: 'POST',
    path: '/_test/admin-only',
    operationId: 'testAdminOnly',
    tag: 'Test',
    summary: 'an administrator route with a body',
    auth: 'administrator',
    body: Type.Object({ n: Type.Integer() }, Strict),
    responses: { 200: { description: 'echo' } },
    handler: async ({ body }) => ({ body }),
  }),
  // Like /identify: a precheck that refuses unless a multipart field says 'on', and outcomes in error bodies.
  route({
    method: 'POST',
    path: '/_test/checked',
    operationId: 'testChecked',
    tag: 'Test',
    summary: 'multipart with a precheck that needs flag=on; errors echo outcome',
    auth: 'none',
    outcomeInErrors: true,
    multipart: { fields: Type.Object({ flag: Type.Optional(Type.String()) }, Strict), files: { file: { required: true, description: 'a file' } } },
    precheck: ({ fields }) => {
      if (fields.flag !== 'on') throw new AppError('attestation_required', 'flag must be on');
    },
    responses: { 200: { description: 'never' } },
    handler: async () => {
      throw new AppError('invalid_image', 'never an image');
    },
  }),
  // Like verify-face: a precheck that accepts no parts at all, so a non-multipart body stays 415.
  route({
    method: 'POST',
    path: '/_test/lenient',
    operationId: 'testLenient',
    tag: 'Test',
    summary: 'multipart with a precheck that only refuses flag=off',
    auth: 'none',
    multipart: { fields: Type.Object({ flag: Type.Optional(Type.String()) }, Strict), files: {} },
    precheck: ({ fields }) => {
      if (fields.flag === 'off') throw new AppError('attestation_required', 'flag is off');
    },
    responses: { 200: { description: 'ok' } },
    handler: async () => ({ body: { ok: true } }),
  }),
  route({
    method: 'GET',
    path: '/_test/boom',
    operationId: 'testBoom',
    tag: 'Test',
    summary: 'an unexpected error',
    auth: 'none',
    responses: { 200: { description: 'never' } },
    handler: async () => {
      throw new Error('secret internal detail: password=hunter2');
    },
  }),
];

const h = useHarness(test, { extraRoutes: probeRoutes, env: { MAX_UPLOAD_BYTES: String(MAX_UPLOAD), REGISTRY_SIMULATOR: 'false' } });

test('a valid request passes with query and params coerced to their types', async (t) => {
  const res = await client(h.url).post('/_test/things/7?verbose=true', { json: { name: 'a', count: 2 } });
  t.is(res.status, 200);
  t.deepEqual(res.body, { body: { name: 'a', count: 2 }, query: { verbose: true }, params: { id: 7 } });
});

test('unknown keys and wrong types are 400 validation_failed listing each violation', async (t) => {
  const res = await client(h.url).post('/_test/things/7', { json: { name: 5, count: '2', extra: true } });
  t.is(res.status, 400);
  t.is(res.body.error, 'validation_failed');
  t.is(typeof res.body.message, 'string');
  const paths = res.body.details.errors.map((e: { path: string }) => e.path).sort();
  t.deepEqual(paths, ['/count', '/extra', '/name']);
  t.true(res.body.details.errors.every((e: { in: string }) => e.in === 'body'));
});

test('bad params, unknown query keys and a missing body field are rejected too', async (t) => {
  const res = await client(h.url).post('/_test/things/zero?debug=1', { json: { name: 'a' } });
  t.is(res.status, 400);
  const where = res.body.details.errors.map((e: { in: string; path: string }) => `${e.in}${e.path}`).sort();
  t.deepEqual(where, ['body/count', 'params/id', 'query/debug']);
});

test('malformed JSON and a non-JSON content type get 4xx envelopes, never a 500', async (t) => {
  const api = client(h.url);
  const broken = await api.post('/_test/things/1', { rawBody: '{"name":', headers: { 'content-type': 'application/json' } });
  t.is(broken.status, 400);
  t.is(broken.body.error, 'validation_failed');
  const text = await api.post('/_test/things/1', { rawBody: 'name=a', headers: { 'content-type': 'text/plain' } });
  t.is(text.status, 415);
  t.is(text.body.error, 'unsupported_media_type');
});

test('multipart: fields are validated strictly and the file is required', async (t) => {
  const api = client(h.url);
  const ok = await api.post('/_test/upload', { form: { note: 'hi', file: { data: Buffer.alloc(1000, 1) } } });
  t.is(ok.status, 200);
  t.deepEqual(ok.body, { note: 'hi', size: 1000 });
  const missing = await api.post('/_test/upload', { form: { note: 'hi', other: 'x' } });
  t.is(missing.status, 400);
  const where = missing.body.details.errors.map((e: { path: string }) => e.path).sort();
  t.deepEqual(where, ['/file', '/other']);
  const json = await api.post('/_test/upload', { json: { note: 'hi' } });
  t.is(json.status, 415);
});

test('a precheck judges a body that is not multipart at all as having no parts; else the 415 stands', async (t) => {
  const api = client(h.url);
  for (const opts of [{}, { json: { flag: 'on' } }, { rawBody: 'flag=on', headers: { 'content-type': 'text/plain' } }]) {
    const res = await api.post('/_test/checked', opts);
    t.is(res.status, 400, JSON.stringify(opts));
    t.is(res.body.error, 'attestation_required');
  }
  const lenient = await api.post('/_test/lenient', { json: { flag: 'on' } });
  t.is(lenient.status, 415);
  t.is(lenient.body.error, 'unsupported_media_type');
  t.deepEqual((await api.post('/_test/lenient', { form: { flag: 'on' } })).body, { ok: true });
});

test('a route with outcomeInErrors echoes the error code as outcome in every error body; others do not', async (t) => {
  const api = client(h.url);
  const refused = await api.post('/_test/checked', { form: { flag: 'off' } });
  t.is(refused.body.outcome, 'attestation_required');
  const invalid = await api.post('/_test/checked', { form: { flag: 'on' } });
  t.is(invalid.status, 400);
  t.is(invalid.body.error, 'validation_failed');
  t.is(invalid.body.outcome, 'validation_failed');
  t.truthy(invalid.body.details);
  const handler = await api.post('/_test/checked', { form: { flag: 'on', file: { data: Buffer.alloc(10, 1) } } });
  t.is(handler.status, 400);
  t.deepEqual(Object.keys(handler.body).sort(), ['error', 'message', 'outcome']);
  t.is(handler.body.outcome, 'invalid_image');
  const plain = await api.post('/_test/upload', { json: { note: 'hi' } });
  t.is(plain.body.outcome, undefined);
});

test('an upload over MAX_UPLOAD_BYTES is 413 payload_too_large', async (t) => {
  const api = client(h.url);
  const res = await api.post('/_test/upload', { form: { note: 'big', file: { data: Buffer.alloc(MAX_UPLOAD * 3, 7) } } });
  t.is(res.status, 413);
  t.is(res.body.error, 'payload_too_large');
  // Just over the limit, so the body is read rather than refused on its announced length.
  const slightly = await api.post('/_test/upload', { form: { note: 'big', file: { data: Buffer.alloc(MAX_UPLOAD + 10, 7) } } });
  t.is(slightly.status, 413);
  t.is(slightly.body.error, 'payload_too_large');
});

test('an unexpected error is 500 internal_error without internals', async (t) => {
  const res = await client(h.url).get('/_test/boom');
  t.is(res.status, 500);
  t.deepEqual(Object.keys(res.body).sort(), ['error', 'message']);
  t.is(res.body.error, 'internal_error');
  t.notRegex(res.text, /hunter2|secret internal/);
});

test('a refused caller gets its 401/403 before its body is looked at', async (t) => {
  const api = client(h.url);
  const invalid = { json: { n: 'not a number', extra: 1 } };
  t.is((await api.post('/_test/admin-only', invalid)).status, 401);
  t.is((await api.post('/_test/admin-only', { ...invalid, token: (await newConsumer(h)).token })).status, 401);
  const operator = await api.post('/_test/admin-only', { ...invalid, token: (await newOperator(h)).token });
  t.is(operator.status, 403);
  t.is(operator.body.error, 'forbidden');
  const gone = await api.post('/_test/admin-only', { ...invalid, token: (await newOperator(h, { role: 'administrator', status: 'deactivated' })).token });
  t.is(gone.body.error, 'operator_deactivated');
  const flagged = await api.post('/_test/admin-only', { ...invalid, token: (await newOperator(h, { role: 'administrator', mustResetPassword: true })).token });
  t.is(flagged.body.error, 'password_reset_required');
  const admin = (await newOperator(h, { role: 'administrator' })).token;
  t.is((await api.post('/_test/admin-only', { ...invalid, token: admin })).status, 400);
  t.deepEqual((await api.post('/_test/admin-only', { json: { n: 3 }, token: admin })).body, { n: 3 });
});

test('with REGISTRY_SIMULATOR=false (always so in production) the simulator is not mounted at all', async (t) => {
  const api = client(h.url);
  t.is((await api.get('/api/stats')).status, 404);
  t.is((await api.post('/api/enroll', { form: { firstName: 'A' } })).status, 404);
  const doc = (await api.get('/openapi.json')).body;
  t.false(Object.keys(doc.paths).some((p) => p.startsWith('/api/')));
});

test('/health counts a registry as reachable when it answers below 500, even 404 to the simulator-only /stats', async (t) => {
  // This server has no simulator mounted, so REGISTRY_URL/stats answers 404: reachable all the same.
  const res = await client(h.url).get('/health');
  t.true(res.body.dependencies.identity_registry.up);
});
