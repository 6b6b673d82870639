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

test.serial("each export sends a notice to the account's phone; the fourth in a day is refused with 429", async (t) => {
  const phone = '+2348031234567';
  const user = await newConsumer(h, { phone });
  const bystander = await newConsumer(h, { phone: '+2348031234568' });
  for (let i = 1; i <= 3; i++) {
    const res = await api().get(`/users/${user.userId}/export`, { token: user.token });
    t.is(res.status, 200, res.text);
    const notices = noticesTo(phone);
    t.is(notices.length, i, `one notice per export (${i})`);
    t.regex(notices.at(-1)!.message!, /copy of all the data held about your account/);
    t.is(notices.at(-1)!.code, undefined);
  }
  const fourth = await api().get(`/users/${user.userId}/export`, { token: user.token });
  t.is(fourth.status, 429);
  t.is(fourth.body.error, 'rate_limited');
  const retryAfter = Number(fourth.headers.get('retry-after'));
  t.true(retryAfter > 23 * 3600 && retryAfter <= 24 * 3600, `Retry-After ${retryAfter}`);
  t.is(noticesTo(phone).length, 3, 'a refused export sends nothing');
  // The limit is per consumer.
  t.is((await api().get(`/users/${bystander.userId}/export`, { token: bystander.token })).status, 200);
  t.is(noticesTo('+2348031234568').length, 1);
});

test.serial("another consumer's export is refused before it counts or notifies", async (t) => {
  const phone = '+2348031234569';
  const user = await newConsumer(h, { phone });
  const other = await newConsumer(h);
  for (let i = 0; i < 5; i++) t.is((await api().get(`/users/${user.userId}/export`, { token: other.token })).status, 403);
  t.is(noticesTo(phone).length, 0);
  t.is((await api().get(`/users/${user.userId}/export`, { token: user.token })).status, 200);
});
