/**
 * SPEC 14.2: anonymous `POST /auth/otp/verify` is capped per client address (refused codes an hour),
 * and neither a refusal by that cap nor a code for a number with no code pending writes an AuditEvent.
 */
import test from 'ava';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { e164, lastCode, otherCode, uniqueLocalPhone } from '../support/auth.js';

// The default cap (30): the test sends exactly that many refused codes from 127.0.0.1.
const h = useHarness(test, { env: { OTP_REQUESTS_PER_IP_PER_HOUR: '100000' } });

const failedRows = async () => Number((await h.deps.db('audit_events').where({ type: 'auth.sign_in_failed' }).count({ n: '*' }))[0]!.n);

test('30 refused codes from one address, then 429 rate_limited with Retry-After, nothing audited but the refusals of a pending code', async (t) => {
  const api = client(h.url);
  const pending = uniqueLocalPhone();
  t.is((await api.post('/auth/otp/request', { json: { phone: pending } })).status, 200);
  const code = lastCode(h, e164(pending));
  const before = await failedRows();

  // Three wrong codes for the number with a code pending: each audited.
  for (let i = 0; i < 3; i++) {
    const r = await api.post('/auth/otp/verify', { json: { phone: pending, code: otherCode(code) } });
    t.is(r.status, 400);
    t.is(r.body.error, 'otp_invalid');
  }
  t.is(await failedRows(), before + 3);

  // 27 codes for numbers nobody asked a code for: refused alike, counted, never audited.
  for (let i = 0; i < 27; i++) {
    const r = await api.post('/auth/otp/verify', { json: { phone: uniqueLocalPhone(), code: '123456' } });
    t.is(r.status, 400);
    t.is(r.body.error, 'otp_invalid');
  }
  t.is(await failedRows(), before + 3, 'a code for a number with no code pending writes no AuditEvent');

  // The 31st refusal is the cap's, even with the right code of the pending number: nothing is looked at.
  const limited = await api.post('/auth/otp/verify', { json: { phone: pending, code } });
  t.is(limited.status, 429);
  t.is(limited.body.error, 'rate_limited');
  const retryAfter = Number(limited.headers.get('retry-after'));
  t.true(retryAfter > 0 && retryAfter <= 3600, `Retry-After ${retryAfter}`);
  const wrongAgain = await api.post('/auth/otp/verify', { json: { phone: pending, code: otherCode(code) } });
  t.is(wrongAgain.status, 429);
  t.is(await failedRows(), before + 3, 'a refusal by the limit writes no AuditEvent');

  // Another address is not affected (a trusted proxy is not configured: the key is the socket's
  // address, so the same code is still pending and unspent).
  const keys = await h.deps.redis.keys(`${h.env.REDIS_PREFIX}:otp:verify-ip:*`);
  t.is(keys.length, 1);
  await h.deps.redis.del(keys[0]!);
  const ok = await api.post('/auth/otp/verify', { json: { phone: pending, code } });
  t.is(ok.status, 200, 'the code was never consumed by the refused submissions');
});
