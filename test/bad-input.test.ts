/**
 * Bad input never reaches a 500 and every refusal carries the
 * `{ error, message }` envelope, also those Node's HTTP server sends on its own.
 */
import test from 'ava';
import net from 'node:net';
import { Writable } from 'node:stream';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { createEnvelopedServer } from '../platform/http/http-envelope.js';
import { createLogger } from '../platform/logger.js';
import { ROOT, startHarness, type Harness } from './helpers/harness.js';
import { client, type Answer } from './helpers/http.js';
import { newConsumer, newOperator } from './helpers/principals.js';

let h: Harness;
let api: ReturnType<typeof client>;
test.before(async () => {
  h = await startHarness();
  api = client(h.url);
});
test.after.always(async () => {
  await h?.stop();
});

const NUL = '\u0000';
const PHOTO = readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', 'lfw', 'Bush_1.png'));

function refusedAsValidation(t: import('ava').ExecutionContext, res: Answer, where: string) {
  t.is(res.status, 400, `${where}: ${res.status} ${res.text}`);
  t.is(res.body?.error, 'validation_failed', where);
  t.is(typeof res.body?.message, 'string', where);
}

test('defect 4: a NUL character in a text field is 400 validation_failed on each of the 7 routes that gave 500', async (t) => {
  const consumer = await newConsumer(h);
  const admin = await newOperator(h, { role: 'administrator' });
  const other = await newOperator(h);
  const cases: [string, Promise<Answer>][] = [
    ['POST /auth/operator/login identifier', api.post('/auth/operator/login', { json: { identifier: `admin${NUL}`, password: 'whatever-it-is' } })],
    ['GET /api/search?name=%00', api.get('/api/search?name=%00')],
    [
      'POST /api/enroll firstName',
      api.post('/api/enroll', {
        form: {
          firstName: `Ada${NUL}`,
          lastName: 'Lovelace',
          dateOfBirth: '1990-01-01',
          gender: 'female',
          photo: { data: PHOTO, type: 'image/png', filename: 'p.png' },
        },
      }),
    ],
    ['POST /disputes reason', api.post('/disputes', { token: consumer.token, json: { referenceId: randomUUID(), reason: `because${NUL}` } })],
    ['POST /operators displayName', api.post('/operators', { token: admin.token, json: { identifier: `nul-${Date.now()}`, displayName: `Eve${NUL}` } })],
    ['PATCH /operators/{id} displayName', api.patch(`/operators/${other.operatorId}`, { token: admin.token, json: { displayName: `Eve${NUL}` } })],
    ['PATCH /disputes/{id} note', api.patch(`/disputes/${randomUUID()}`, { token: admin.token, json: { status: 'investigating', note: `n${NUL}` } })],
  ];
  for (const [where, pending] of cases) refusedAsValidation(t, await pending, where);
  // Nothing was written: the display name is unchanged, no person has that name.
  const op = await h.deps.db('operators').where({ id: other.operatorId }).first('displayName');
  t.is(op.displayName, 'Test Operator');
});

test('an unpaired UTF-16 surrogate (valid JSON, not storable as UTF-8) is 400 too; the violation names the field', async (t) => {
  const res = await api.post('/auth/operator/login', {
    rawBody: '{"identifier":"ad\\ud800min","password":"whatever-it-is"}',
    headers: { 'content-type': 'application/json' },
  });
  refusedAsValidation(t, res, 'lone surrogate');
  t.deepEqual(
    res.body.details.errors.map((e: { path: string }) => e.path),
    ['/identifier'],
  );
  // A NUL in a path id that any string may take (an unknown operator id) is 400, not a PostgreSQL error.
  const admin = await newOperator(h, { role: 'administrator' });
  refusedAsValidation(t, await api.get('/operators/abc%00/sessions', { token: admin.token }), 'NUL in a path id');
  // The always-403 setting keeps its answer whatever is sent (SPEC: anything, any caller).
  const patch = await api.patch('/settings/attestation-required?x=%00');
  t.is(patch.status, 403);
  t.is(patch.body.error, 'setting_immutable');
});

test('defect 5: a correctly signed token whose sid or sub is not a UUID is 401 unauthorized, not 500', async (t) => {
  const consumer = await newConsumer(h);
  const admin = await newOperator(h, { role: 'administrator' });
  const forged = [
    await h.deps.tokens.signAccess({ sub: consumer.userId, aud: 'consumer', sid: 'not-a-uuid' }),
    await h.deps.tokens.signAccess({ sub: 'user-1', aud: 'consumer', sid: consumer.sessionId }),
  ];
  for (const { token } of forged) {
    const res = await api.post('/disputes', { token, json: { referenceId: randomUUID() } });
    t.is(res.status, 401, res.text);
    t.is(res.body.error, 'unauthorized');
  }
  const op = await h.deps.tokens.signAccess({ sub: admin.operatorId, aud: 'operator', sid: "1' or '1'='1" });
  const res = await api.get('/disputes', { token: op.token });
  t.is(res.status, 401, res.text);
  t.is(res.body.error, 'unauthorized');
});

/** Sends raw bytes and returns what the server answered before closing. */
function rawExchange(port: number, bytes: string, waitMs = 3000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let out = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (out += d));
    socket.on('error', reject);
    socket.on('close', () => resolve(out));
    socket.write(bytes);
    setTimeout(() => socket.destroy(), waitMs).unref();
  });
}

function envelopeOf(raw: string): { status: number; body: { error?: string; message?: string } } {
  const [head, body] = raw.split('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head ?? '')?.[1]);
  try {
    return { status, body: JSON.parse(body ?? '') };
  } catch {
    return { status, body: {} };
  }
}

test('defect 8: oversized headers get 431 with the envelope; malformed HTTP, no Host and an unknown Expect get theirs', async (t) => {
  const big = await fetch(`${h.url}/health`, { headers: { 'x-padding': 'a'.repeat(20_000) } });
  t.is(big.status, 431);
  const body = (await big.json()) as { error: string; message: string };
  t.is(body.error, 'headers_too_large');
  t.is(typeof body.message, 'string');

  const port = Number(new URL(h.url).port);
  const malformed = envelopeOf(await rawExchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\nNot a header line\r\n\r\n'));
  t.is(malformed.status, 400);
  t.is(malformed.body.error, 'bad_request');
  const nulHeader = envelopeOf(await rawExchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\nUser-Agent: a\u0000b\r\n\r\n'));
  t.is(nulHeader.status, 400);
  t.is(nulHeader.body.error, 'bad_request');
  const noHost = envelopeOf(await rawExchange(port, 'GET /health HTTP/1.1\r\nConnection: close\r\n\r\n'));
  t.is(noHost.status, 400);
  t.is(noHost.body.error, 'bad_request');
  const expect = await rawExchange(port, 'POST /auth/logout HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
  t.is(envelopeOf(expect).status, 417);
  t.is(envelopeOf(expect).body.error, 'expectation_failed');
});

test('defect 8: a request that is not received within the request timeout gets 408 with the envelope', async (t) => {
  // Like the Koa app: the answer waits for the whole body.
  const server = createEnvelopedServer((req, res) => req.resume().on('end', () => res.end('{}')), {
    requestTimeout: 300,
    headersTimeout: 200,
    connectionsCheckingInterval: 50,
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  try {
    const started = Date.now();
    const raw = await rawExchange(port, 'POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12', 5000);
    const answer = envelopeOf(raw);
    t.is(answer.status, 408, raw);
    t.is(answer.body.error, 'request_timeout');
    t.true(Date.now() - started < 4000);
  } finally {
    server.close();
  }
});

test('defect 8: more than 20 multipart fields is 400 validation_failed, not 413', async (t) => {
  const form: Record<string, string> = {};
  for (let i = 0; i < 21; i++) form[`f${i}`] = 'x';
  const res = await api.post('/api/enroll', { form });
  t.is(res.status, 400, res.text);
  t.is(res.body.error, 'validation_failed');
  // An oversize upload is still 413.
  const huge = await api.post('/api/enroll', { form: { photo: { data: Buffer.alloc(h.config.http.maxUploadBytes + 1024), type: 'image/png' } } });
  t.is(huge.status, 413);
  t.is(huge.body.error, 'payload_too_large');
});

test('defect 8: error logs keep the error code and the PostgreSQL code; a one-time code is still redacted', (t) => {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(chunk.toString());
      cb();
    },
  });
  const log = createLogger({ level: 'info', destination });
  log.error({ err: { message: 'duplicate key', code: '23505' }, code: 'internal_error' }, 'request failed');
  log.error({ err: { code: 'ECONNREFUSED' }, code: 'dependency_unavailable' }, 'request failed');
  log.info({ body: { phone: '+2348030000000', code: '654321' } }, 'otp');
  const [first, second, third] = lines.map((l) => JSON.parse(l));
  t.is(first.code, 'internal_error');
  t.is(first.err.code, '23505');
  t.is(second.err.code, 'ECONNREFUSED');
  t.is(second.code, 'dependency_unavailable');
  t.is(third.body.code, '[redacted]');
  t.false(lines.join('').includes('654321'));
});
