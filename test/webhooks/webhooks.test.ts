/**
 * Webhooks end to end (SPEC 12.6): the real API, PostgreSQL, Redis and delivery worker (in the web
 * process, as by default), and a real receiver on loopback (so WEBHOOK_ALLOW_PRIVATE=true) that checks
 * every delivery with the npm `standardwebhooks` package, as a bank's receiver would. The retry
 * schedule is shortened through its setting.
 */
import test from 'ava';
import { Webhook } from 'standardwebhooks';
import { issueProofToken } from '../../features/verification/proof-tokens.js';
import { WEBHOOK_EVENT_TYPES } from '../../features/webhooks/repository.js';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { identifyRow, insertLogs, verifySelfRow } from '../support/search-logs.js';

const RETRY_SCHEDULE = [1, 2];
let receiver: WebhookReceiver;
const h = useHarness(
  test,
  async () => {
    receiver = await startWebhookReceiver();
    return {
      env: {
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_RETRY_SCHEDULE_SECONDS: RETRY_SCHEDULE.join(','),
        WEBHOOK_DISPATCH_INTERVAL_MS: '100',
        WEBHOOK_TIMEOUT_MS: '2000',
        BANK_ACCOUNT_CONFIRM_DELAY_MS: '200',
      },
    };
  },
  {
    ready: async () => {
      adminToken = (await newOperator(h, { role: 'administrator' })).token;
    },
    afterStop: () => receiver.close(),
  },
);
const api = () => client(h.url);
let adminToken: string;

async function createEndpoint(path: string, events: readonly string[] = WEBHOOK_EVENT_TYPES): Promise<{ id: string; secret: string }> {
  const res = await api().post('/webhooks/endpoints', { token: adminToken, json: { url: `${receiver.url}${path}`, events, description: `test ${path}` } });
  if (res.status !== 201) throw new Error(`create endpoint: ${res.status} ${res.text}`);
  return { id: res.body.endpoint.id, secret: res.body.secret };
}

/** What the receiver does first: verify the signature with the package; returns the parsed body. */
function verified(secret: string, w: ReceivedWebhook): { type: string; timestamp: string; data: Record<string, unknown> } {
  return new Webhook(secret).verify(w.body, w.headers) as { type: string; timestamp: string; data: Record<string, unknown> };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test.serial('an administrator registers an endpoint; the secret is shown once and stored sealed', async (t) => {
  const res = await api().post('/webhooks/endpoints', {
    token: adminToken,
    json: { url: `${receiver.url}/created`, events: ['user.deleted', 'dispute.created'] },
  });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body).sort(), ['endpoint', 'secret']);
  t.regex(res.body.secret, /^whsec_[A-Za-z0-9+/]+=*$/);
  t.is(Buffer.from(res.body.secret.slice(6), 'base64').length, 32);
  const e = res.body.endpoint;
  t.like(e, { url: `${receiver.url}/created`, events: ['user.deleted', 'dispute.created'], status: 'active' });
  t.truthy(e.id && e.createdAt);
  t.is(res.headers.get('cache-control'), 'no-store');

  const got = await api().get(`/webhooks/endpoints/${e.id}`, { token: adminToken });
  t.is(got.status, 200);
  t.false(got.text.includes(res.body.secret.slice(6)), 'never shown again');
  const list = await api().get('/webhooks/endpoints?page=1&pageSize=100', { token: adminToken });
  t.true(list.body.items.some((x: { id: string }) => x.id === e.id));
  t.false(list.text.includes('whsec_'));

  const row = await h.deps.db('webhook_endpoints').where({ id: e.id }).first();
  t.false(JSON.stringify(row).includes(res.body.secret.slice(6)), 'the secret is not in the row in clear');
  const audit = await h.deps.db('audit_events').where({ type: 'webhook.endpoint_created', subjectId: e.id }).first();
  t.truthy(audit);
  t.false(JSON.stringify(audit).includes(res.body.secret.slice(6)));
});

test.serial('bad input is a 4xx in the envelope, an unknown endpoint a 404', async (t) => {
  const bad = await api().post('/webhooks/endpoints', { token: adminToken, json: { url: `${receiver.url}/x`, events: ['no.such.event'] } });
  t.is(bad.status, 400);
  t.is(bad.body.error, 'validation_failed');
  const noEvents = await api().post('/webhooks/endpoints', { token: adminToken, json: { url: `${receiver.url}/x`, events: [] } });
  t.is(noEvents.status, 400);
  const ftp = await api().post('/webhooks/endpoints', { token: adminToken, json: { url: 'ftp://example.com/x', events: ['user.deleted'] } });
  t.is(ftp.status, 400);
  t.is(ftp.body.error, 'validation_failed');
  const unknown = '00000000-0000-4000-8000-000000000000';
  for (const [method, path] of [
    ['get', `/webhooks/endpoints/${unknown}`],
    ['delete', `/webhooks/endpoints/${unknown}`],
    ['post', `/webhooks/endpoints/${unknown}/rotate-secret`],
    ['get', `/webhooks/endpoints/${unknown}/deliveries`],
    ['post', `/webhooks/events/${unknown}/replay`],
  ] as const) {
    const res = await api()[method](path, { token: adminToken });
    t.is(res.status, 404, `${method} ${path}`);
    t.is(res.body.error, 'not_found');
  }
  const emptyPatch = await api().patch(`/webhooks/endpoints/${unknown}`, { token: adminToken, json: {} });
  t.is(emptyPatch.status, 400);
});

test.serial('each event type arrives once, signed, with a thin body (no phone, name or number)', async (t) => {
  const { secret } = await createEndpoint('/all');
  const phone = '+2348039998877';
  const consumer = await newConsumer(h, { phone });
  await h.deps.db('users').where({ id: consumer.userId }).update({ name: 'Ngozi Adeyemi', bankAccount: '0123456789' });
  const other = await newConsumer(h);

  // dispute.created and dispute.updated
  const [selfRef] = await insertLogs(h.deps.db, [verifySelfRow({ userId: consumer.userId })]);
  const dispute = await api().post('/disputes', { token: consumer.token, json: { referenceId: selfRef, reason: 'Ngozi Adeyemi says this was not her' } });
  t.is(dispute.status, 201);
  const moved = await api().patch(`/disputes/${dispute.body.dispute.id}`, {
    token: adminToken,
    json: { status: 'investigating', note: 'call +2348039998877' },
  });
  t.is(moved.status, 200);
  // identify.escalated
  const operator = await newOperator(h);
  const [identifyRef] = await insertLogs(h.deps.db, [identifyRow({ operatorId: operator.operatorId, candidates: [{ userId: consumer.userId, score: 0.9 }] })]);
  t.is((await api().post(`/identify/${identifyRef}/escalate`, { token: operator.token })).status, 200);
  // operator.deactivated
  t.is((await api().delete(`/operators/${operator.operatorId}`, { token: adminToken })).status, 200);
  // user.bank_account.updated: the pending change lands through the upstream worker
  const patched = await api().patch(`/users/${consumer.userId}`, {
    token: consumer.token,
    json: { proofToken: (await issueProofToken(h.deps, consumer.userId, consumer.sessionId)).proofToken, bankAccount: '9876543210' },
  });
  t.is(patched.status, 200);
  t.is(patched.body.status, 'pending_upstream');
  // user.deleted
  const deleted = await api().delete(`/users/${other.userId}`, {
    token: other.token,
    json: { proofToken: (await issueProofToken(h.deps, other.userId, other.sessionId)).proofToken },
  });
  t.is(deleted.status, 200);

  const expected = ['dispute.created', 'dispute.updated', 'identify.escalated', 'operator.deactivated', 'user.bank_account.updated', 'user.deleted'];
  const got = await receiver.waitFor('/all', expected.length);
  await sleep(500); // nothing more arrives
  const bodies = receiver.on('/all').map((w) => ({ w, body: verified(secret, w) }));
  t.deepEqual(bodies.map((b) => b.body.type).sort(), expected, 'each once');
  t.is(new Set(got.map((w) => w.headers['webhook-id'])).size, expected.length);

  const byType = Object.fromEntries(bodies.map((b) => [b.body.type, b]));
  t.deepEqual(byType['dispute.created']!.body.data, { disputeId: dispute.body.dispute.id, referenceId: selfRef, userId: consumer.userId, status: 'open' });
  t.deepEqual(byType['dispute.updated']!.body.data, {
    disputeId: dispute.body.dispute.id,
    referenceId: selfRef,
    userId: consumer.userId,
    previousStatus: 'open',
    status: 'investigating',
  });
  t.like(byType['identify.escalated']!.body.data, { referenceId: identifyRef, operatorId: operator.operatorId });
  t.deepEqual(byType['operator.deactivated']!.body.data, { operatorId: operator.operatorId });
  t.deepEqual(byType['user.bank_account.updated']!.body.data, { userId: consumer.userId, status: 'applied' });
  t.deepEqual(byType['user.deleted']!.body.data, { userId: other.userId });
  for (const { w, body } of bodies) {
    t.deepEqual(Object.keys(body).sort(), ['data', 'timestamp', 'type']);
    t.is(w.headers['content-type'], 'application/json');
    t.regex(w.headers['webhook-signature']!, /^v1,[A-Za-z0-9+/]+=*$/, 'one signature: no rotation yet');
    t.is(w.headers['webhook-id'], (await h.deps.db('webhook_events').where({ id: w.headers['webhook-id'] }).first())?.id);
    // Thin: no phone, name, account number, free text, in any form.
    for (const secretValue of ['2348039998877', '8039998877', 'Ngozi', 'Adeyemi', '0123456789', '9876543210', 'not her']) {
      t.false(w.body.includes(secretValue), `${body.type} carries ${secretValue}`);
    }
  }
  // The bank account really landed (the event reports a real change).
  t.is((await h.deps.db('users').where({ id: consumer.userId }).first()).bankAccount, '9876543210');
});

test.serial('a failing receiver gets the same webhook-id on the retry schedule, then the delivery is failed', async (t) => {
  const { id, secret } = await createEndpoint('/failing', ['operator.deactivated']);
  receiver.script('/failing', [500]);
  const failedBefore = await failedMetric();
  const op = await newOperator(h);
  t.is((await api().delete(`/operators/${op.operatorId}`, { token: adminToken })).status, 200);

  const attempts = await receiver.waitFor('/failing', RETRY_SCHEDULE.length + 1, 20_000);
  await sleep(RETRY_SCHEDULE[RETRY_SCHEDULE.length - 1]! * 1000 + 800); // no attempt beyond the schedule
  t.is(receiver.on('/failing').length, RETRY_SCHEDULE.length + 1);
  t.is(new Set(attempts.map((a) => a.headers['webhook-id'])).size, 1, 'same webhook-id on every attempt');
  t.is(new Set(attempts.map((a) => a.body)).size, 1, 'same body on every attempt');
  for (const a of attempts) t.is(verified(secret, a).type, 'operator.deactivated');
  for (let i = 1; i < attempts.length; i++) {
    const gap = attempts[i]!.at - attempts[i - 1]!.at;
    const wait = RETRY_SCHEDULE[i - 1]! * 1000;
    t.true(gap >= wait * 0.9 - 50 && gap <= wait * 1.1 + 1500, `retry ${i} after ${gap} ms (schedule ${wait} ms ±10%)`);
  }

  const log = await api().get(`/webhooks/endpoints/${id}/deliveries?page=1&pageSize=10`, { token: adminToken });
  t.is(log.status, 200);
  t.is(log.body.total, 3);
  t.deepEqual(
    log.body.items.map((a: { attempt: number }) => a.attempt),
    [3, 2, 1],
    'newest first',
  );
  for (const a of log.body.items) {
    t.like(a, { eventId: attempts[0]!.headers['webhook-id'], eventType: 'operator.deactivated', status: 'failed', responseStatus: 500 });
  }
  const delivery = await h.deps.db('webhook_deliveries').where({ endpointId: id }).first();
  t.is(delivery.status, 'failed');
  t.is(await failedMetric(), failedBefore + 1, 'webhook_delivery_attempts_total{outcome="failed"} counts the given-up delivery');
});

test.serial('a receiver that fails then recovers gets it on the retry; the log shows both attempts', async (t) => {
  const { id } = await createEndpoint('/flaky', ['operator.deactivated']);
  receiver.script('/flaky', [503, 204]);
  const op = await newOperator(h);
  await api().delete(`/operators/${op.operatorId}`, { token: adminToken });
  await receiver.waitFor('/flaky', 2);
  await sleep(300);
  const log = await api().get(`/webhooks/endpoints/${id}/deliveries`, { token: adminToken });
  t.deepEqual(
    log.body.items.map((a: { attempt: number; status: string; responseStatus: number }) => [a.attempt, a.status, a.responseStatus]),
    [
      [2, 'succeeded', 204],
      [1, 'failed', 503],
    ],
  );
});

test.serial('410 Gone disables the endpoint at once: no retry, no further delivery', async (t) => {
  const { id } = await createEndpoint('/gone', ['operator.deactivated']);
  receiver.script('/gone', [410]);
  await api().delete(`/operators/${(await newOperator(h)).operatorId}`, { token: adminToken });
  await receiver.waitFor('/gone', 1);
  await sleep(RETRY_SCHEDULE[0]! * 1000 + 600);
  t.is(receiver.on('/gone').length, 1);
  const got = await api().get(`/webhooks/endpoints/${id}`, { token: adminToken });
  t.like(got.body.endpoint, { status: 'disabled', disabledReason: 'gone' });
  await api().delete(`/operators/${(await newOperator(h)).operatorId}`, { token: adminToken });
  await sleep(600);
  t.is(receiver.on('/gone').length, 1, 'a disabled endpoint gets nothing');

  // An administrator re-enables it; events from then on arrive.
  const reenabled = await api().patch(`/webhooks/endpoints/${id}`, { token: adminToken, json: { status: 'active' } });
  t.like(reenabled.body.endpoint, { status: 'active', disabledReason: null });
});

test.serial('a rotation signs with both secrets during the overlap; each verifies on its own', async (t) => {
  const { id, secret: oldSecret } = await createEndpoint('/rotating', ['operator.deactivated']);
  const rotated = await api().post(`/webhooks/endpoints/${id}/rotate-secret`, { token: adminToken });
  t.is(rotated.status, 200);
  const newSecret: string = rotated.body.secret;
  t.regex(newSecret, /^whsec_/);
  t.not(newSecret, oldSecret);
  t.truthy((await api().get(`/webhooks/endpoints/${id}`, { token: adminToken })).body.endpoint.previousSecretExpiresAt);

  await api().delete(`/operators/${(await newOperator(h)).operatorId}`, { token: adminToken });
  const [w] = await receiver.waitFor('/rotating', 1);
  const signatures = w!.headers['webhook-signature']!.split(' ');
  t.is(signatures.length, 2, 'two signatures, space-separated');
  t.true(signatures.every((s) => s.startsWith('v1,')));
  t.is(verified(newSecret, w!).type, 'operator.deactivated');
  t.is(verified(oldSecret, w!).type, 'operator.deactivated');
  t.throws(() => verified(`whsec_${Buffer.alloc(32, 7).toString('base64')}`, w!), undefined, 'another secret does not verify');

  // Once the overlap is over only the new secret signs.
  await h.deps
    .db('webhook_endpoints')
    .where({ id })
    .update({ previousSecretExpiresAt: new Date(Date.now() - 1000) });
  await api().delete(`/operators/${(await newOperator(h)).operatorId}`, { token: adminToken });
  const [, later] = await receiver.waitFor('/rotating', 2);
  t.is(later!.headers['webhook-signature']!.split(' ').length, 1);
  t.is(verified(newSecret, later!).type, 'operator.deactivated');
  t.throws(() => verified(oldSecret, later!));
});

test.serial('a replay resends the event with the same webhook-id and body', async (t) => {
  const { secret } = await createEndpoint('/replayed', ['operator.deactivated']);
  await api().delete(`/operators/${(await newOperator(h)).operatorId}`, { token: adminToken });
  const [first] = await receiver.waitFor('/replayed', 1);
  const eventId = first!.headers['webhook-id']!;
  const replay = await api().post(`/webhooks/events/${eventId}/replay`, { token: adminToken });
  t.is(replay.status, 202);
  t.like(replay.body, { eventId, status: 'queued' });
  t.true(replay.body.deliveries >= 1);
  const [, again] = await receiver.waitFor('/replayed', 2);
  t.is(again!.headers['webhook-id'], eventId);
  t.is(again!.body, first!.body);
  t.is(verified(secret, again!).type, 'operator.deactivated');
});

test.serial('a replay goes only to the endpoints that were subscribed when the event was written', async (t) => {
  const before = await createEndpoint('/replay-before', ['operator.deactivated']);
  const otherType = await createEndpoint('/replay-other-type', ['user.deleted']);
  await api().delete(`/operators/${(await newOperator(h)).operatorId}`, { token: adminToken });
  const [first] = await receiver.waitFor('/replay-before', 1);
  const eventId = first!.headers['webhook-id']!;
  // Afterwards: a new endpoint for the type, and the other one subscribes to it.
  await createEndpoint('/replay-after', ['operator.deactivated']);
  const resubscribed = await api().patch(`/webhooks/endpoints/${otherType.id}`, {
    token: adminToken,
    json: { events: ['user.deleted', 'operator.deactivated'] },
  });
  t.is(resubscribed.status, 200);

  const replay = await api().post(`/webhooks/events/${eventId}/replay`, { token: adminToken });
  t.is(replay.status, 202);
  t.like(replay.body, { eventId, status: 'queued' });
  const [, again] = await receiver.waitFor('/replay-before', 2);
  t.is(again!.headers['webhook-id'], eventId);
  t.is(verified(before.secret, again!).type, 'operator.deactivated');
  await sleep(700);
  t.is(receiver.on('/replay-after').filter((w) => w.headers['webhook-id'] === eventId).length, 0, 'created after the event');
  t.is(receiver.on('/replay-other-type').filter((w) => w.headers['webhook-id'] === eventId).length, 0, 'subscribed after the event');
  const sent = await h.deps.db('webhook_deliveries').where({ eventId }).select('endpointId');
  t.false(sent.some((d: { endpointId: string }) => d.endpointId === otherType.id));
});

test.serial('a replay goes to an endpoint only while its URL is the one the event was first sent to', async (t) => {
  const endpoint = await createEndpoint('/replay-url-first', ['operator.deactivated']);
  await api().delete(`/operators/${(await newOperator(h)).operatorId}`, { token: adminToken });
  const [first] = await receiver.waitFor('/replay-url-first', 1);
  const eventId = first!.headers['webhook-id']!;
  const moved = await api().patch(`/webhooks/endpoints/${endpoint.id}`, { token: adminToken, json: { url: `${receiver.url}/replay-url-moved` } });
  t.is(moved.status, 200, moved.text);
  const replay = await api().post(`/webhooks/events/${eventId}/replay`, { token: adminToken });
  t.is(replay.status, 202);
  await sleep(900);
  t.is(receiver.on('/replay-url-moved').length, 0, 'never to the new address');
  t.is(receiver.on('/replay-url-first').length, 1, 'nor again to the old one');
  // Back at the address it was sent to: the replay goes.
  t.is((await api().patch(`/webhooks/endpoints/${endpoint.id}`, { token: adminToken, json: { url: `${receiver.url}/replay-url-first` } })).status, 200);
  t.is((await api().post(`/webhooks/events/${eventId}/replay`, { token: adminToken })).status, 202);
  const [, again] = await receiver.waitFor('/replay-url-first', 2);
  t.is(again!.headers['webhook-id'], eventId);
});

test.serial('disabling by PATCH stops deliveries; DELETE removes the endpoint', async (t) => {
  const { id } = await createEndpoint('/disabled', ['operator.deactivated']);
  const off = await api().patch(`/webhooks/endpoints/${id}`, {
    token: adminToken,
    json: { status: 'disabled', events: ['operator.deactivated', 'user.deleted'] },
  });
  t.is(off.status, 200);
  t.like(off.body.endpoint, { status: 'disabled', disabledReason: 'administrator', events: ['operator.deactivated', 'user.deleted'] });
  await api().delete(`/operators/${(await newOperator(h)).operatorId}`, { token: adminToken });
  await sleep(700);
  t.is(receiver.on('/disabled').length, 0);
  t.is((await api().delete(`/webhooks/endpoints/${id}`, { token: adminToken })).status, 204);
  t.is((await api().get(`/webhooks/endpoints/${id}`, { token: adminToken })).status, 404);
});

test.serial('only administrators reach the webhook routes', async (t) => {
  const operator = await newOperator(h);
  const consumer = await newConsumer(h);
  for (const token of [undefined, consumer.token, operator.token]) {
    const res = await api().post('/webhooks/endpoints', { token, json: { url: `${receiver.url}/x`, events: ['user.deleted'] } });
    t.is(res.status, token === operator.token ? 403 : 401);
    t.truthy(res.body.error);
  }
});

async function failedMetric(): Promise<number> {
  const text = await (await fetch(`${h.url}/metrics`)).text();
  const m = /^webhook_delivery_attempts_total\{outcome="failed"\} (\d+)/m.exec(text);
  return m ? Number(m[1]) : NaN;
}
