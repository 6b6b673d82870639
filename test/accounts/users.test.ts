/**
 * GET/PATCH/DELETE /users/{id}: the strict schema, the single-use proofToken (also under 10 concurrent
 * PATCHes), the phone change, the pending bankAccount landing after the upstream delay, and DELETE
 * (the embedding out of the index first, then the soft-delete; the same token then gets 404).
 * proofTokens come from issueProofToken, the function POST /verify/self calls on a match.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import test from 'ava';
import { issueProofToken, proofTokenKey } from '../../features/verification/proof-tokens.js';
import { upsertCanonical } from '../../features/face/embeddings-repository.js';
import { isUniqueViolation } from '../../platform/database/unit-of-work.js';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { Queue } from 'bullmq';
import { bullPrefix } from '../../platform/jobs/contract.js';
import { createLogger } from '../../platform/logger.js';
import { startBankAccountWorker } from '../../features/accounts/worker/worker.js';
import { keyRingOf } from '../../platform/keys/templates.js';

const CONFIRM_DELAY_MS = 600;

const h = useHarness(test, { env: { BANK_ACCOUNT_CONFIRM_DELAY_MS: String(CONFIRM_DELAY_MS) } });

const api = () => client(h.url);
const proof = async (c: { userId: string; sessionId: string }) => (await issueProofToken(h.deps, c.userId, c.sessionId)).proofToken;
let phoneCounter = 0;
/** A fresh valid Nigerian mobile number, in local form and in E.164. */
const freshPhone = () => {
  const n = String(Date.now() % 1e5).padStart(5, '0') + String(++phoneCounter % 100).padStart(2, '0');
  return { local: `0806${n}`, e164: `+234806${n}` };
};

test("GET /users/{id} answers the profile of the token's subject only", async (t) => {
  const me = await newConsumer(h);
  const other = await newConsumer(h);
  await h.deps.db('users').where({ id: me.userId }).update({ name: 'Ada Obi', dateOfBirth: '1990-04-01', gender: 'F', bankAccount: '0123456789' });
  await h.deps.db('ninLinks').insert({
    userId: me.userId,
    nin: '12345678901',
    registryRecord: JSON.stringify({ firstName: 'Ada', lastName: 'Obi', dateOfBirth: '1990-04-01', gender: 'F' }),
  });

  const res = await api().get(`/users/${me.userId}`, { token: me.token });
  t.is(res.status, 200);
  t.deepEqual(
    Object.keys(res.body).sort(),
    ['bankAccount', 'bvnLinked', 'createdAt', 'dateOfBirth', 'gender', 'id', 'name', 'ninLinked', 'pendingBankAccount', 'phone'].sort(),
  );
  t.is(res.body.id, me.userId);
  t.is(res.body.name, 'Ada Obi');
  t.is(res.body.dateOfBirth, '1990-04-01');
  t.is(res.body.bankAccount, '0123456789');
  t.is(res.body.pendingBankAccount, null);
  t.true(res.body.ninLinked);
  t.false(res.body.bvnLinked);
  t.regex(res.body.phone, /^\+234\d{10}$/);

  const foreign = await api().get(`/users/${other.userId}`, { token: me.token });
  t.is(foreign.status, 403);
  t.is(foreign.body.error, 'forbidden');
  t.is((await api().get(`/users/${me.userId}`)).status, 401);
  const operator = await newOperator(h);
  t.is((await api().get(`/users/${me.userId}`, { token: operator.token })).status, 401);
});

test('PATCH rejects name, dateOfBirth, gender and unknown keys with 400, without burning the proofToken', async (t) => {
  const me = await newConsumer(h);
  const token = await proof(me);
  const { e164 } = freshPhone();
  for (const extra of [{ name: 'X' }, { dateOfBirth: '2000-01-01' }, { gender: 'M' }, { nickname: 'x' }, { id: me.userId }]) {
    const res = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: token, phone: e164, ...extra } });
    t.is(res.status, 400, JSON.stringify(extra));
    t.is(res.body.error, 'validation_failed');
    t.true(res.body.details.errors.some((e: { path: string }) => e.path === `/${Object.keys(extra)[0]}`));
  }
  for (const bad of [
    {},
    { phone: 'not a phone' },
    { phone: '123' },
    { bankAccount: '12345' },
    { bankAccount: '01234567890' },
    { bankAccount: 1234567890 },
    { phone: 8031234567 },
  ]) {
    const res = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: token, ...bad } });
    t.is(res.status, 400, JSON.stringify(bad));
    t.is(res.body.error, 'validation_failed');
  }
  // Every refusal above left the token alive.
  const ok = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: token, phone: e164 } });
  t.is(ok.status, 200);
  t.is(ok.body.status, 'applied');
});

test("PATCH without a valid proofToken is 403 proof_token_invalid: missing, unknown, expired, reused, another user's", async (t) => {
  const me = await newConsumer(h);
  const other = await newConsumer(h);
  const body = () => ({ phone: freshPhone().e164 });
  const expect403 = async (json: Record<string, unknown>, what: string) => {
    const res = await api().patch(`/users/${me.userId}`, { token: me.token, json });
    t.is(res.status, 403, what);
    t.is(res.body.error, 'proof_token_invalid', what);
  };
  await expect403(body(), 'missing');
  await expect403({ ...body(), proofToken: '' }, 'empty');
  await expect403({ ...body(), proofToken: randomBytes(32).toString('base64url') }, 'never issued');

  const expired = await proof(me);
  await h.deps.redis.pexpire(proofTokenKey(h.deps, expired), 1);
  await new Promise((r) => setTimeout(r, 20));
  await expect403({ ...body(), proofToken: expired }, 'expired');

  const othersToken = await proof(other);
  await expect403({ ...body(), proofToken: othersToken }, "another user's");
  // ... and presenting it did not burn it for its owner.
  const ownerUse = await api().patch(`/users/${other.userId}`, { token: other.token, json: { ...body(), proofToken: othersToken } });
  t.is(ownerUse.status, 200);

  const once = await proof(me);
  t.is((await api().patch(`/users/${me.userId}`, { token: me.token, json: { ...body(), proofToken: once } })).status, 200);
  await expect403({ ...body(), proofToken: once }, 'reused');
});

test('the token is stored only as a hash, with the configured TTL', async (t) => {
  const me = await newConsumer(h);
  const { proofToken, expiresIn } = await issueProofToken(h.deps, me.userId, me.sessionId);
  t.is(expiresIn, h.config.identity.proofTokenTtlSeconds);
  t.true(Buffer.from(proofToken, 'base64url').length >= 16);
  const key = h.deps.keys('proof', createHash('sha256').update(proofToken).digest('hex'));
  // Bound to the user and to the session that ran /verify/self (SPEC 12.3).
  t.is(await h.deps.redis.get(key), `${me.userId} ${me.sessionId}`);
  const ttl = await h.deps.redis.ttl(key);
  t.true(ttl > 0 && ttl <= h.config.identity.proofTokenTtlSeconds);
  const keys = await h.deps.redis.keys(`${h.config.redis.prefix}:*`);
  t.false(keys.some((k) => k.includes(proofToken)));
});

test('one proofToken, 10 concurrent PATCHes: exactly one succeeds', async (t) => {
  const me = await newConsumer(h);
  const token = await proof(me);
  const phones = Array.from({ length: 10 }, () => freshPhone().e164);
  const results = await Promise.all(phones.map((phone) => api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: token, phone } })));
  const ok = results.filter((r) => r.status === 200);
  t.is(ok.length, 1, JSON.stringify(results.map((r) => r.status)));
  t.true(results.filter((r) => r.status !== 200).every((r) => r.status === 403 && r.body.error === 'proof_token_invalid'));
  const now = await api().get(`/users/${me.userId}`, { token: me.token });
  t.is(now.body.phone, ok[0]!.body.user.phone);
  const audits = await h.deps.db('auditEvents').where({ type: 'profile.changed', subjectId: me.userId });
  t.is(audits.length, 1);
});

test('a phone change is normalised, applied at once, audited, and must be free among live users', async (t) => {
  const me = await newConsumer(h);
  const { local, e164 } = freshPhone();
  const res = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: await proof(me), phone: local } });
  t.is(res.status, 200);
  t.is(res.body.status, 'applied');
  t.is(res.body.user.phone, e164);
  t.is((await api().get(`/users/${me.userId}`, { token: me.token })).body.phone, e164);
  const audit = await h.deps.db('auditEvents').where({ type: 'profile.changed', subjectId: me.userId }).first();
  t.truthy(audit);
  t.is(audit.actorType, 'consumer');
  t.deepEqual(audit.data.fields, ['phone']);
  t.false(JSON.stringify(audit.data).includes(e164), 'the audit row carries a masked number');

  // Taken by another live account: 409, and the token is spent by it (SPEC 14.2): a new proof for another try.
  const other = await newConsumer(h);
  const token = await proof(other);
  const taken = await api().patch(`/users/${other.userId}`, { token: other.token, json: { proofToken: token, phone: e164 } });
  t.is(taken.status, 409);
  t.is(taken.body.error, 'conflict');
  const spent = await api().patch(`/users/${other.userId}`, { token: other.token, json: { proofToken: token, phone: freshPhone().local } });
  t.is(spent.status, 403);
  t.is(spent.body.error, 'proof_token_invalid');
  const retry = await api().patch(`/users/${other.userId}`, { token: other.token, json: { proofToken: await proof(other), phone: freshPhone().local } });
  t.is(retry.status, 200);
});

test('PATCH /users/{id} checks the schema, then the proofToken, and only then whether another account holds the number', async (t) => {
  const holder = await newConsumer(h);
  const { phone: held } = (await h.deps.db('users').where({ id: holder.userId }).first('phone')) as { phone: string };
  const prober = await newConsumer(h);
  // Without a valid proof the answer is the same whether the number holds an account or not: no probing.
  for (const proofToken of [undefined, 'not-a-proof-token', await proof(holder)]) {
    for (const phone of [held, freshPhone().e164]) {
      const res = await api().patch(`/users/${prober.userId}`, { token: prober.token, json: { ...(proofToken ? { proofToken } : {}), phone } });
      t.is(res.status, 403, `${proofToken ?? 'no token'} ${phone === held ? 'held number' : 'free number'}: ${res.text}`);
      t.is(res.body.error, 'proof_token_invalid');
    }
  }
  // The schema comes first of all.
  const bad = await api().patch(`/users/${prober.userId}`, { token: prober.token, json: { phone: held, name: 'Someone' } });
  t.is(bad.status, 400);
  t.is(bad.body.error, 'validation_failed');
  // With the proof, the conflict is named, and the 409 spends the token (SPEC 14.2): one selfie buys
  // one answer about one number, not a probe of many.
  const token = await proof(prober);
  const taken = await api().patch(`/users/${prober.userId}`, { token: prober.token, json: { proofToken: token, phone: held } });
  t.is(taken.status, 409);
  t.is(taken.body.error, 'conflict');
  for (const phone of [freshPhone().e164, held]) {
    const probe = await api().patch(`/users/${prober.userId}`, { token: prober.token, json: { proofToken: token, phone } });
    t.is(probe.status, 403, probe.text);
    t.is(probe.body.error, 'proof_token_invalid');
  }
  const retry = await api().patch(`/users/${prober.userId}`, { token: prober.token, json: { proofToken: await proof(prober), phone: freshPhone().local } });
  t.is(retry.status, 200, retry.text);
});

test('a phone change to a number outside OTP_ALLOWED_COUNTRY_CODES is 400 phone_not_supported (the token kept); notices go only to allowed numbers', async (t) => {
  const me = await newConsumer(h);
  const token = await proof(me);
  const foreign = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: token, phone: '+447400123456' } });
  t.is(foreign.status, 400, foreign.text);
  t.is(foreign.body.error, 'phone_not_supported');
  // An account whose number came from before the setting: the notice goes to the new number only.
  const legacy = '+447400123457';
  await h.deps.db('users').where({ id: me.userId }).update({ phone: legacy });
  const { e164 } = freshPhone();
  const moved = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: token, phone: e164 } });
  t.is(moved.status, 200, moved.text);
  await new Promise((r) => setTimeout(r, 200));
  const sentTo = readFileSync(h.outboxFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { to: string }).to);
  t.true(sentTo.includes(e164), 'the new number hears of the change');
  t.false(sentTo.includes(legacy), 'no SMS to a number outside OTP_ALLOWED_COUNTRY_CODES');
});

test('a bankAccount change is pending_upstream, the old value stays in effect, and it lands after the delay', async (t) => {
  const me = await newConsumer(h);
  await h.deps.db('users').where({ id: me.userId }).update({ bankAccount: '0000000001' });
  const started = Date.now();
  const res = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: await proof(me), bankAccount: '2222222222' } });
  t.is(res.status, 200);
  t.is(res.body.status, 'pending_upstream');
  t.is(res.body.user.bankAccount, '0000000001');
  t.is(res.body.user.pendingBankAccount, '2222222222');

  const early = await api().get(`/users/${me.userId}`, { token: me.token });
  if (Date.now() - started < CONFIRM_DELAY_MS) t.is(early.body.bankAccount, '0000000001', 'still the old value before the delay');

  let landed: { bankAccount: string; pendingBankAccount: string | null } | undefined;
  for (let i = 0; i < 100 && !landed; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await api().get(`/users/${me.userId}`, { token: me.token });
    if (now.body.bankAccount === '2222222222') landed = now.body;
  }
  t.truthy(landed, 'the upstream confirmation landed');
  t.true(Date.now() - started >= CONFIRM_DELAY_MS);
  t.is(landed!.pendingBankAccount, null);
  t.truthy(await h.deps.db('auditEvents').where({ type: 'user.bank_account.updated', subjectId: me.userId }).first());
});

test("a confirmation an earlier version queued on the upstream queue is dropped there, and the repair sweep lands it through the wing's own queue", async (t) => {
  const me = await newConsumer(h);
  // A pending change whose job is on no queue of this version: as left by a version that queued it on `upstream`.
  const requestedAt = new Date(Date.now() - 1000);
  await h.deps
    .db('users')
    .where({ id: me.userId })
    .update({ bankAccount: '0000000001', pendingBankAccount: '5555555555', pendingBankAccountRequestedAt: requestedAt });
  const connection = h.deps.redis.duplicate();
  const upstream = new Queue('upstream', { connection, prefix: bullPrefix(h.config.redis.prefix) });
  const legacy = { kind: 'bank-account-confirm', userId: me.userId, requestedAt: requestedAt.toISOString() };
  await upstream.add('bank-account-confirm', legacy, { jobId: `bank-${me.userId}-${requestedAt.getTime()}`, attempts: 5, removeOnComplete: true });
  const worker = await startBankAccountWorker({ config: h.config, logger: createLogger({ level: 'silent' }), db: h.deps.db, keyRing: keyRingOf(h.config) });
  try {
    let landed = false;
    for (let i = 0; i < 100 && !landed; i++) {
      await new Promise((r) => setTimeout(r, 100));
      landed = (await api().get(`/users/${me.userId}`, { token: me.token })).body.bankAccount === '5555555555';
    }
    t.true(landed, 'the pending change landed');
    const pending = async () => Object.values(await upstream.getJobCounts('wait', 'active')).reduce((a, b) => a + b, 0);
    for (let i = 0; i < 50 && (await pending()) > 0; i++) await new Promise((r) => setTimeout(r, 100));
    const counts = await upstream.getJobCounts('wait', 'active', 'delayed', 'failed');
    t.deepEqual(counts, { wait: 0, active: 0, delayed: 0, failed: 0 }, 'the old job was taken and dropped, not failed or retried');
    t.is(await worker.sweep(), 0, 'nothing left to re-enqueue');
  } finally {
    await worker.close();
    await upstream.close();
    connection.disconnect();
  }
});

test('a superseded bankAccount change never lands over the newer one', async (t) => {
  // The case needs the second change requested while the first is still pending: the first one's
  // confirmation then fires (CONFIRM_DELAY_MS after it) over the second. On a loaded machine the first
  // may land before the second even arrives (then the second answer shows it in effect): that is
  // not the case, so it is set up again with a fresh account, at most 3 times.
  for (let attempt = 1; attempt <= 3; attempt++) {
    const me = await newConsumer(h);
    const [firstProof, secondProof] = [await proof(me), await proof(me)];
    const first = await api().patch(`/users/${me.userId}`, { token: me.token, json: { proofToken: firstProof, bankAccount: '3333333333' } });
    t.is(first.status, 200);
    const second = await api().patch(`/users/${me.userId}`, {
      token: me.token,
      json: { proofToken: secondProof, bankAccount: '4444444444', phone: freshPhone().e164 },
    });
    t.is(second.status, 200);
    t.is(second.body.status, 'pending_upstream', 'a request including a bankAccount is pending as a whole');
    if (second.body.user.bankAccount === '3333333333') {
      t.log(`attempt ${attempt}: the first change landed before the second arrived`);
      continue;
    }
    t.is(second.body.user.pendingBankAccount, '4444444444');
    // The first confirmation fires while the second is pending: it must not land the superseded value.
    const seen = new Set<string | null>();
    const until = Date.now() + 20_000;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, 25));
      const now = await api().get(`/users/${me.userId}`, { token: me.token });
      seen.add(now.body.bankAccount);
      if (now.body.pendingBankAccount === null) break;
    }
    t.false(seen.has('3333333333'), JSON.stringify([...seen]));
    const final = await api().get(`/users/${me.userId}`, { token: me.token });
    t.is(final.body.bankAccount, '4444444444');
    t.is(final.body.pendingBankAccount, null);
    return;
  }
  t.fail('the first change landed before the second arrived, 3 times');
});

test('DELETE: the embedding leaves the index and the account is soft-deleted together; the same token then gets 404', async (t) => {
  const me = await newConsumer(h);
  const vec = Array.from({ length: 512 }, (_, i) => Math.sin(i + 1));
  const { seq: upsertSeq } = await upsertCanonical(h.deps.db, me.userId, vec, 'link_nin', 'test-engine');
  const refreshHash = createHash('sha256').update(randomBytes(32)).digest('hex');
  await h.deps.db('refreshTokens').insert({ sessionId: me.sessionId, tokenHash: refreshHash, expiresAt: new Date(Date.now() + 86_400_000) });

  // Without a proofToken nothing happens.
  const refused = await api().delete(`/users/${me.userId}`, { token: me.token, json: {} });
  t.is(refused.status, 403);
  t.is(refused.body.error, 'proof_token_invalid');
  const noBody = await api().delete(`/users/${me.userId}`, { token: me.token });
  t.is(noBody.status, 403);
  t.is(noBody.body.error, 'proof_token_invalid');
  const extraKey = await api().delete(`/users/${me.userId}`, { token: me.token, json: { proofToken: 'x', reason: 'bye' } });
  t.is(extraKey.status, 400);
  t.truthy(await h.deps.db('canonicalEmbeddings').where({ userId: me.userId }).first());
  const { phone } = await h.deps.db('users').where({ id: me.userId }).first('phone');

  const res = await api().delete(`/users/${me.userId}`, { token: me.token, json: { proofToken: await proof(me) } });
  t.is(res.status, 200);
  t.deepEqual(res.body, { status: 'deleted' });

  // The vector index: the row is gone and a `delete` is in the change log after the upsert.
  t.falsy(await h.deps.db('canonicalEmbeddings').where({ userId: me.userId }).first());
  const change = await h.deps.db('embeddingChanges').where({ userId: me.userId, op: 'delete' }).first();
  t.truthy(change);
  t.true(BigInt(change.seq) > BigInt(upsertSeq));
  // ... logged in the same transaction as the soft-delete.
  const user = await h.deps.db('users').where({ id: me.userId }).first();
  t.truthy(user.deletedAt);
  t.true(new Date(change.createdAt).getTime() <= new Date(user.deletedAt).getTime());
  // The refresh tokens of the user's sessions are finished.
  const rt = await h.deps.db('refreshTokens').where({ tokenHash: refreshHash }).first();
  t.true(new Date(rt.expiresAt).getTime() <= Date.now());
  t.truthy(await h.deps.db('auditEvents').where({ type: 'user.deleted', subjectId: me.userId }).first());

  // The same, still-unexpired access token: 404 on every /users route.
  for (const [method, path] of [
    ['get', `/users/${me.userId}`],
    ['get', `/users/${me.userId}/history`],
    ['get', `/users/${me.userId}/preferences`],
  ] as const) {
    const r = await api()[method](path, { token: me.token });
    t.is(r.status, 404, path);
    t.is(r.body.error, 'not_found');
  }
  const again = await api().delete(`/users/${me.userId}`, { token: me.token, json: { proofToken: await proof(me) } });
  t.is(again.status, 404);

  // The phone left the erased row, and is free again for a new account.
  t.is(user.phone, null);
  const reborn = await newConsumer(h, { phone });
  t.is((await api().get(`/users/${reborn.userId}`, { token: reborn.token })).body.phone, phone);
});

test('DELETE cut short by PostgreSQL going away leaves the account whole (embedding kept), so the consumer can prove and retry', async (t) => {
  const me = await newConsumer(h);
  const vec = Array.from({ length: 512 }, (_, i) => Math.cos(i + 1));
  await upsertCanonical(h.deps.db, me.userId, vec, 'link_nin', 'test-engine');
  // PostgreSQL ends the session at the soft-delete (57P01 admin_shutdown, as in a restart): a real
  // trigger on this user's row, not a mock.
  const fn = `fail_delete_${me.userId.replaceAll('-', '')}`;
  await h.deps.db.raw(
    `CREATE FUNCTION ${fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.deleted_at IS NOT NULL AND OLD.id = '${me.userId}' THEN RAISE EXCEPTION 'terminating connection due to administrator command' USING ERRCODE = '57P01'; END IF; RETURN NEW; END $$`,
  );
  await h.deps.db.raw(`CREATE TRIGGER ${fn} BEFORE UPDATE ON users FOR EACH ROW EXECUTE FUNCTION ${fn}()`);
  try {
    const cut = await api().delete(`/users/${me.userId}`, { token: me.token, json: { proofToken: await proof(me) } });
    t.is(cut.status, 503, cut.text);
    t.is(cut.body.error, 'dependency_unavailable');
    t.truthy(cut.headers.get('retry-after'));
  } finally {
    await h.deps.db.raw(`DROP TRIGGER ${fn} ON users`);
    await h.deps.db.raw(`DROP FUNCTION ${fn}()`);
  }
  // Nothing happened: the account is live AND still has its face (so /verify/self can issue a new proof).
  t.is((await api().get(`/users/${me.userId}`, { token: me.token })).status, 200);
  t.truthy(await h.deps.db('canonicalEmbeddings').where({ userId: me.userId }).first(), 'the embedding must not be gone without the deletion');
  t.falsy(await h.deps.db('embeddingChanges').where({ userId: me.userId, op: 'delete' }).first());

  const retried = await api().delete(`/users/${me.userId}`, { token: me.token, json: { proofToken: await proof(me) } });
  t.is(retried.status, 200, retried.text);
  t.falsy(await h.deps.db('canonicalEmbeddings').where({ userId: me.userId }).first());
  t.truthy((await h.deps.db('users').where({ id: me.userId }).first()).deletedAt);
});

test("DELETE of another user's id is 403 and deletes nothing", async (t) => {
  const me = await newConsumer(h);
  const other = await newConsumer(h);
  const res = await api().delete(`/users/${other.userId}`, { token: me.token, json: { proofToken: await proof(me) } });
  t.is(res.status, 403);
  t.is(res.body.error, 'forbidden');
  t.is((await api().get(`/users/${other.userId}`, { token: other.token })).status, 200);
});

test('a phone taken between the check and the write is still a conflict: the write reports a unique violation', async (t) => {
  // Two accounts racing for one number both pass the "taken by another live account" check; the partial
  // unique index then refuses the second write, and the service answers 409 only if it recognises that.
  const holder = await newConsumer(h);
  const racer = await newConsumer(h);
  const { phone } = (await h.deps.db('users').where({ id: holder.userId }).first('phone')) as { phone: string };
  const error = await t.throwsAsync(h.deps.repos.users.updateLive(racer.userId, { phone }));
  t.true(isUniqueViolation(error));
  t.false(isUniqueViolation(new Error('not a database error')));
});
