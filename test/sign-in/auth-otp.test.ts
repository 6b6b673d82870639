/**
 * Consumer sign-in by one-time code: POST /auth/otp/request and /auth/otp/verify, through HTTP, with the
 * codes read from the SMS outbox (and, for the webhook transport, from a real local HTTP receiver).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { useHarness, startHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { e164, lastCode, otherCode, outboxCodes, signInConsumer, uniqueLocalPhone } from '../support/auth.js';

const COOLDOWN = 5;

// A cooldown short enough to wait out, long enough that requests meant to land inside it do so on a
// loaded machine (at 2 s one did not); a high IP cap: every test here comes from 127.0.0.1.
const h = useHarness(test, {
  env: { OTP_COOLDOWN_SECONDS: String(COOLDOWN), OTP_REQUESTS_PER_IP_PER_HOUR: '100000', OTP_VERIFY_FAILURES_PER_IP_PER_HOUR: '100000' },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a request answers exactly { status: "sent" } and writes a 6-digit code for the E.164 number to the outbox', async (t) => {
  const phone = uniqueLocalPhone();
  const res = await client(h.url).post('/auth/otp/request', { json: { phone } });
  t.is(res.status, 200);
  t.deepEqual(res.body, { status: 'sent' });
  const codes = outboxCodes(h, e164(phone));
  t.is(codes.length, 1);
  t.regex(codes[0]!, /^[0-9]{6}$/);
});

test('the answer does not reveal whether the number has an account', async (t) => {
  const api = client(h.url);
  const registered = await signInConsumer(h);
  await sleep(COOLDOWN * 1000 + 100);
  const known = await api.post('/auth/otp/request', { json: { phone: registered.phone } });
  const unknown = await api.post('/auth/otp/request', { json: { phone: uniqueLocalPhone() } });
  t.is(known.status, 200);
  t.is(unknown.status, 200);
  t.deepEqual(known.body, unknown.body);
  t.is(known.text, unknown.text);
});

test('a code verifies once: the token pair, the user created on the first success, the code then spent', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  await api.post('/auth/otp/request', { json: { phone } });
  const code = lastCode(h, e164(phone));
  const res = await api.post('/auth/otp/verify', { json: { phone, code } });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['accessToken', 'expiresIn', 'refreshExpiresIn', 'refreshToken', 'tokenType', 'userId']);
  t.is(res.body.tokenType, 'Bearer');
  t.is(res.body.expiresIn, 900);
  t.is(res.body.refreshExpiresIn, 30 * 24 * 3600);
  t.regex(res.body.userId, /^[0-9a-f-]{36}$/);
  t.is(res.body.accessToken.split('.').length, 3);
  t.regex(res.body.refreshToken, /^[A-Za-z0-9_-]{43}$/);
  t.is(res.headers.get('cache-control'), 'no-store');

  const users = await h.deps.db('users').where({ phone: e164(phone) });
  t.is(users.length, 1);
  t.is(users[0].id, res.body.userId);

  const again = await api.post('/auth/otp/verify', { json: { phone, code } });
  t.is(again.status, 400);
  t.is(again.body.error, 'otp_invalid');
});

test('the same code submitted by 10 concurrent requests gives exactly one token pair', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  await api.post('/auth/otp/request', { json: { phone } });
  const code = lastCode(h, e164(phone));
  const answers = await Promise.all(Array.from({ length: 10 }, () => api.post('/auth/otp/verify', { json: { phone, code } })));
  const ok = answers.filter((a) => a.status === 200);
  t.is(ok.length, 1);
  for (const a of answers.filter((x) => x.status !== 200)) {
    t.is(a.status, 400);
    t.is(a.body.error, 'otp_invalid');
  }
  const users = await h.deps.db('users').where({ phone: e164(phone) });
  t.is(users.length, 1);
  const sessions = await h.deps.db('sessions').where({ subjectType: 'consumer', subjectId: users[0].id });
  t.is(sessions.length, 1);
});

test('wrong codes 1-4 are 400 otp_invalid, the 5th kills the code (429), then even the right code is 429 until a new one', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  await api.post('/auth/otp/request', { json: { phone } });
  const code = lastCode(h, e164(phone));
  const wrong = otherCode(code);
  for (let i = 1; i <= 4; i++) {
    const res = await api.post('/auth/otp/verify', { json: { phone, code: wrong } });
    t.is(res.status, 400, `wrong code ${i}`);
    t.is(res.body.error, 'otp_invalid');
  }
  const fifth = await api.post('/auth/otp/verify', { json: { phone, code: wrong } });
  t.is(fifth.status, 429);
  t.is(fifth.body.error, 'otp_too_many_attempts');
  t.true(Number(fifth.headers.get('retry-after')) >= 1);

  const right = await api.post('/auth/otp/verify', { json: { phone, code } });
  t.is(right.status, 429);
  t.is(right.body.error, 'otp_too_many_attempts');
  const another = await api.post('/auth/otp/verify', { json: { phone, code: otherCode(wrong) } });
  t.is(another.status, 429);
  t.is((await h.deps.db('users').where({ phone: e164(phone) })).length, 0, 'no user without a correct code');

  // A new code (after the cooldown) starts afresh.
  await sleep(COOLDOWN * 1000 + 100);
  t.is((await api.post('/auth/otp/request', { json: { phone } })).status, 200);
  const fresh = lastCode(h, e164(phone));
  const ok = await api.post('/auth/otp/verify', { json: { phone, code: fresh } });
  t.is(ok.status, 200);
});

test('wrong attempts are counted per code: a correct code after 4 wrong ones still signs in', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  await api.post('/auth/otp/request', { json: { phone } });
  const code = lastCode(h, e164(phone));
  for (let i = 0; i < 4; i++) t.is((await api.post('/auth/otp/verify', { json: { phone, code: otherCode(code) } })).status, 400);
  t.is((await api.post('/auth/otp/verify', { json: { phone, code } })).status, 200);
});

test('a phone gets one code per cooldown: 429 otp_cooldown with Retry-After, also when written in the other form', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  t.is((await api.post('/auth/otp/request', { json: { phone } })).status, 200);
  for (const form of [phone, e164(phone)]) {
    const res = await api.post('/auth/otp/request', { json: { phone: form } });
    t.is(res.status, 429);
    t.is(res.body.error, 'otp_cooldown');
    const retry = Number(res.headers.get('retry-after'));
    t.true(retry >= 1 && retry <= COOLDOWN, `Retry-After ${retry}`);
  }
  t.is(outboxCodes(h, e164(phone)).length, 1, 'no second SMS during the cooldown');
  await sleep(COOLDOWN * 1000 + 100);
  t.is((await api.post('/auth/otp/request', { json: { phone } })).status, 200);
  t.is(outboxCodes(h, e164(phone)).length, 2);
});

test('a new code replaces the previous one', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  await api.post('/auth/otp/request', { json: { phone } });
  const first = lastCode(h, e164(phone));
  await sleep(COOLDOWN * 1000 + 100);
  await api.post('/auth/otp/request', { json: { phone } });
  const second = lastCode(h, e164(phone));
  if (first !== second) {
    const old = await api.post('/auth/otp/verify', { json: { phone, code: first } });
    t.is(old.status, 400);
    t.is(old.body.error, 'otp_invalid');
  }
  t.is((await api.post('/auth/otp/verify', { json: { phone, code: second } })).status, 200);
});

test('08031234567 and +2348031234567 are the same user', async (t) => {
  const local = uniqueLocalPhone();
  const a = await signInConsumer(h, local);
  await sleep(COOLDOWN * 1000 + 100);
  const b = await signInConsumer(h, e164(local));
  t.is(a.userId, b.userId);
  const spaced = `${local.slice(0, 4)} ${local.slice(4, 7)} ${local.slice(7)}`;
  await sleep(COOLDOWN * 1000 + 100);
  const c = await signInConsumer(h, spaced);
  t.is(c.userId, a.userId);
  t.is((await h.deps.db('users').where({ phone: e164(local) })).length, 1);
});

test('an invalid phone is 400 validation_failed, and no SMS is sent', async (t) => {
  const api = client(h.url);
  for (const phone of [
    '12345',
    'abc',
    '0803123456',
    '08031234567x',
    '+2348001234567' /* toll-free */,
    '+44 909 8790000' /* premium rate */,
    '+2348031234567 ext. 12',
    '',
  ]) {
    const res = await api.post('/auth/otp/request', { json: { phone } });
    t.is(res.status, 400, phone);
    t.is(res.body.error, 'validation_failed', phone);
    t.truthy(res.body.details, phone);
    const normalised = phone.replace(/[^0-9+]/g, '');
    if (normalised.length > 6) t.is(outboxCodes(h, normalised.startsWith('+') ? normalised : e164(normalised)).length, 0, phone);
  }
  for (const json of [{}, { phone: 8031234567 }, { phone: '08031234567', extra: 1 }, { phone: null }]) {
    const res = await api.post('/auth/otp/request', { json });
    t.is(res.status, 400, JSON.stringify(json));
    t.is(res.body.error, 'validation_failed');
  }
  const verify = await api.post('/auth/otp/verify', { json: { phone: '12345', code: '123456' } });
  t.is(verify.status, 400);
  t.is(verify.body.error, 'validation_failed');
});

test('a mobile number outside OTP_ALLOWED_COUNTRY_CODES (default 234) is 400 phone_not_supported, and no SMS is sent', async (t) => {
  const api = client(h.url);
  for (const phone of ['+233 24 123 4567' /* Ghana */, '+44 7400 123456' /* United Kingdom */, '+1 201 555 0123' /* United States */]) {
    const res = await api.post('/auth/otp/request', { json: { phone } });
    t.is(res.status, 400, `${phone}: ${res.text}`);
    t.is(res.body.error, 'phone_not_supported', phone);
    t.is(outboxCodes(h, phone.replace(/ /g, '')).length, 0, phone);
  }
  const ok = await api.post('/auth/otp/request', { json: { phone: uniqueLocalPhone() } });
  t.is(ok.status, 200, 'a Nigerian number is served');
});

test('the code must be 6 digits by schema', async (t) => {
  const api = client(h.url);
  const phone = uniqueLocalPhone();
  for (const code of ['12345', '1234567', 'abcdef', '12345a', ' 123456', 123456]) {
    const res = await api.post('/auth/otp/verify', { json: { phone, code } });
    t.is(res.status, 400, String(code));
    t.is(res.body.error, 'validation_failed');
  }
  const res = await api.post('/auth/otp/verify', { json: { phone } });
  t.is(res.status, 400);
  t.is(res.body.error, 'validation_failed');
});

test('a code never requested is 400 otp_invalid', async (t) => {
  const res = await client(h.url).post('/auth/otp/verify', { json: { phone: uniqueLocalPhone(), code: '000000' } });
  t.is(res.status, 400);
  t.is(res.body.error, 'otp_invalid');
});

test('codes are kept only hashed, with their lifetime; no phone number or code appears in Redis', async (t) => {
  const phone = uniqueLocalPhone();
  await client(h.url).post('/auth/otp/request', { json: { phone } });
  const code = lastCode(h, e164(phone));
  const keys = await h.deps.redis.keys(`${h.config.redis.prefix}:otp:*`);
  t.true(keys.length >= 2);
  let codeKeys = 0;
  for (const key of keys) {
    t.false(key.includes(phone.slice(1)) || key.includes(e164(phone)), key);
    const type = await h.deps.redis.type(key);
    const dump = type === 'hash' ? JSON.stringify(await h.deps.redis.hgetall(key)) : type === 'string' ? String(await h.deps.redis.get(key)) : '';
    t.false(dump.includes(code), `${key} holds the code`);
    const ttl = await h.deps.redis.ttl(key);
    if (ttl === -2) continue; // consumed meanwhile by another test of this file
    t.not(ttl, -1, `${key} has no expiry`);
    if (key.includes(':otp:code:')) {
      codeKeys++;
      t.true(ttl <= h.config.otp.ttlSeconds, `ttl ${ttl}`);
    }
  }
  t.true(codeKeys >= 1);
});

test('a deleted account frees its number: the next sign-in creates a new user', async (t) => {
  const first = await signInConsumer(h);
  await h.deps.db('users').where({ id: first.userId }).update({ deletedAt: new Date() });
  await sleep(COOLDOWN * 1000 + 100);
  const second = await signInConsumer(h, first.phone);
  t.not(second.userId, first.userId);
});

test('the per-IP hourly cap answers 429 rate_limited with Retry-After; X-Forwarded-For is ignored unless TRUST_PROXY', async (t) => {
  const capped = await startHarness({ env: { OTP_REQUESTS_PER_IP_PER_HOUR: '3' } });
  try {
    const api = client(capped.url);
    for (let i = 0; i < 3; i++) {
      const res = await api.post('/auth/otp/request', { json: { phone: uniqueLocalPhone() }, headers: { 'x-forwarded-for': `203.0.113.${i + 1}` } });
      t.is(res.status, 200);
    }
    const phone = uniqueLocalPhone();
    const res = await api.post('/auth/otp/request', { json: { phone }, headers: { 'x-forwarded-for': '203.0.113.99' } });
    t.is(res.status, 429);
    t.is(res.body.error, 'rate_limited');
    const retry = Number(res.headers.get('retry-after'));
    t.true(retry > 3500 && retry <= 3600, `Retry-After ${retry}`);
    t.is(outboxCodes(capped, e164(phone)).length, 0, 'nothing sent over the cap');
  } finally {
    await capped.stop();
  }
});

test('behind a trusted proxy the cap counts each client address (IPv6 by /64)', async (t) => {
  const proxied = await startHarness({ env: { OTP_REQUESTS_PER_IP_PER_HOUR: '2', TRUST_PROXY: 'true' } });
  try {
    const api = client(proxied.url);
    const ask = (ip: string) => api.post('/auth/otp/request', { json: { phone: uniqueLocalPhone() }, headers: { 'x-forwarded-for': ip } });
    t.is((await ask('198.51.100.7')).status, 200);
    t.is((await ask('198.51.100.7')).status, 200);
    const over = await ask('198.51.100.7');
    t.is(over.status, 429);
    t.is(over.body.error, 'rate_limited');
    t.is((await ask('198.51.100.8')).status, 200, 'another client is not affected');
    t.is((await ask('2001:db8:1:2::1')).status, 200);
    t.is((await ask('2001:db8:1:2:aaaa::2')).status, 200);
    t.is((await ask('2001:db8:1:2:ffff::3')).status, 429, 'same /64');
    t.is((await ask('2001:db8:1:3::1')).status, 200, 'another /64');
    // Entries the client writes to the left of what the proxy appended change nothing.
    t.is((await ask('10.0.0.1, 198.51.100.7')).status, 429, 'spoofed left-most entries are ignored');
    t.is((await ask('10.0.0.2, 198.51.100.7')).status, 429);
  } finally {
    await proxied.stop();
  }
});

interface Received {
  authorization: string | undefined;
  body: { to: string; code: string; message: string; sentAt: string };
}

async function smsGateway(behaviour: { status: number; hang?: boolean }): Promise<{ url: string; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      received.push({ authorization: req.headers.authorization, body: JSON.parse(data) });
      if (behaviour.hang) return; // never answers
      res.statusCode = behaviour.status;
      res.end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/sms`, received, server };
}

test('the webhook transport POSTs the code to the gateway; a failed delivery is 503 and can be retried at once', async (t) => {
  const behaviour = { status: 200, hang: false };
  const gw = await smsGateway(behaviour);
  const hooked = await startHarness({
    env: { SMS_TRANSPORT: 'webhook', SMS_WEBHOOK_URL: gw.url, SMS_WEBHOOK_TOKEN: 'gw-secret', SMS_WEBHOOK_TIMEOUT_MS: '1500' },
  });
  try {
    const api = client(hooked.url);
    const phone = uniqueLocalPhone();
    t.is((await api.post('/auth/otp/request', { json: { phone } })).status, 200);
    t.is(gw.received.length, 1);
    const msg = gw.received[0]!;
    t.is(msg.authorization, 'Bearer gw-secret');
    t.is(msg.body.to, e164(phone));
    t.regex(msg.body.code, /^[0-9]{6}$/);
    t.true(msg.body.message.includes(msg.body.code));
    t.is((await api.post('/auth/otp/verify', { json: { phone, code: msg.body.code } })).status, 200);

    const other = uniqueLocalPhone();
    behaviour.status = 500;
    const failed = await api.post('/auth/otp/request', { json: { phone: other } });
    t.is(failed.status, 503);
    t.is(failed.body.error, 'dependency_unavailable');
    behaviour.hang = true;
    const started = Date.now();
    const timedOut = await api.post('/auth/otp/request', { json: { phone: other } });
    t.is(timedOut.status, 503, 'no cooldown after a failed delivery');
    t.true(Date.now() - started < 3000);
    behaviour.hang = false;
    behaviour.status = 202;
    t.is((await api.post('/auth/otp/request', { json: { phone: other } })).status, 200, 'retried at once');
    const code = gw.received[gw.received.length - 1]!.body.code;
    t.is((await api.post('/auth/otp/verify', { json: { phone: other, code } })).status, 200);
  } finally {
    await hooked.stop();
    gw.server.closeAllConnections();
    await new Promise((r) => gw.server.close(r));
  }
});

test('a phone gets at most OTP_REQUESTS_PER_PHONE_PER_DAY codes; then 429 rate_limited with Retry-After, and other phones are unaffected', async (t) => {
  const capped = await startHarness({ env: { OTP_COOLDOWN_SECONDS: '0', OTP_REQUESTS_PER_PHONE_PER_DAY: '3', OTP_REQUESTS_PER_IP_PER_HOUR: '100000' } });
  try {
    const api = client(capped.url);
    const phone = uniqueLocalPhone();
    for (let i = 1; i <= 3; i++) t.is((await api.post('/auth/otp/request', { json: { phone } })).status, 200, `code ${i}`);
    const over = await api.post('/auth/otp/request', { json: { phone } });
    t.is(over.status, 429);
    t.is(over.body.error, 'rate_limited');
    const retryAfter = Number(over.headers.get('retry-after'));
    t.true(retryAfter > 3600 && retryAfter <= 86400, String(retryAfter));
    t.is(outboxCodes(capped, e164(phone)).length, 3, 'no fourth SMS was sent');
    t.is((await api.post('/auth/otp/request', { json: { phone: uniqueLocalPhone() } })).status, 200);
  } finally {
    await capped.stop();
  }
});
