/**
 * GET /users/{id}/export (SPEC 13.3): each export sends an SMS notice to the account's phone (the SMS
 * outbox here), and at most EXPORTS_PER_DAY (default 3) are served per consumer, then 429
 * `rate_limited` with Retry-After.
 */
import test from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import { useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer } from './helpers/principals.js';
import { issueProofToken } from '../features/verification/proof-tokens.js';

const h = useHarness(test);
const api = () => client(h.url);

function noticesTo(phone: string): { to: string; kind?: string; message?: string; code?: string }[] {
  if (!existsSync(h.outboxFile)) return [];
  return readFileSync(h.outboxFile, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { to: string; kind?: string; message?: string; code?: string })
    .filter((m) => m.to === phone && m.kind === 'notice');
}

/** An export with a fresh step-up proof of the consumer's own session (X-Proof-Token). */
async function exportOf(user: { userId: string; token: string; sessionId: string }) {
  const { proofToken } = await issueProofToken(h.deps, user.userId, user.sessionId);
  return api().get(`/users/${user.userId}/export`, { token: user.token, headers: { 'x-proof-token': proofToken } });
}

test.serial('the export needs a step-up proof in X-Proof-Token: without one, a wrong or a spent one, 403 proof_token_invalid and no notice', async (t) => {
  const phone = '+2348031234570';
  const user = await newConsumer(h, { phone });
  const bare = await api().get(`/users/${user.userId}/export`, { token: user.token });
  t.is(bare.status, 403);
  t.is(bare.body.error, 'proof_token_invalid');
  const wrong = await api().get(`/users/${user.userId}/export`, { token: user.token, headers: { 'x-proof-token': 'not-a-proof' } });
  t.is(wrong.status, 403);
  t.is(noticesTo(phone).length, 0, 'nothing exported, nothing sent');
  const { proofToken } = await issueProofToken(h.deps, user.userId, user.sessionId);
  const ok = await api().get(`/users/${user.userId}/export`, { token: user.token, headers: { 'x-proof-token': proofToken } });
  t.is(ok.status, 200, ok.text);
  const again = await api().get(`/users/${user.userId}/export`, { token: user.token, headers: { 'x-proof-token': proofToken } });
  t.is(again.status, 403, 'single use');
  t.is(again.body.error, 'proof_token_invalid');
  // Cleared for the next test's count of this user's exports.
  await h.deps.redis.del(`${h.env.REDIS_PREFIX}:accounts:export-rate:${user.userId}`);
});

test.serial("each export sends a notice to the account's phone; the fourth in a day is refused with 429", async (t) => {
  const phone = '+2348031234567';
  const user = await newConsumer(h, { phone });
  const bystander = await newConsumer(h, { phone: '+2348031234568' });
  for (let i = 1; i <= 3; i++) {
    const res = await exportOf(user);
    t.is(res.status, 200, res.text);
    const notices = noticesTo(phone);
    t.is(notices.length, i, `one notice per export (${i})`);
    t.regex(notices.at(-1)!.message!, /copy of all the data held about your account/);
    t.is(notices.at(-1)!.code, undefined);
  }
  const fourth = await exportOf(user);
  t.is(fourth.status, 429);
  t.is(fourth.body.error, 'rate_limited');
  const retryAfter = Number(fourth.headers.get('retry-after'));
  t.true(retryAfter > 23 * 3600 && retryAfter <= 24 * 3600, `Retry-After ${retryAfter}`);
  t.is(noticesTo(phone).length, 3, 'a refused export sends nothing');
  // The limit is per consumer.
  t.is((await exportOf(bystander)).status, 200);
  t.is(noticesTo('+2348031234568').length, 1);
});

test.serial("another consumer's export is refused before it counts or notifies", async (t) => {
  const phone = '+2348031234569';
  const user = await newConsumer(h, { phone });
  const other = await newConsumer(h);
  for (let i = 0; i < 5; i++) t.is((await api().get(`/users/${user.userId}/export`, { token: other.token })).status, 403);
  t.is(noticesTo(phone).length, 0);
  t.is((await exportOf(user)).status, 200);
});
