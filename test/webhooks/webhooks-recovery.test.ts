/**
 * A process that dies in the middle of an attempt (after claiming it, before recording its outcome)
 * loses no delivery: once the claim's lease has run out, the dispatcher of any process queues the next
 * attempt, which goes out with the same webhook-id. The web process runs no worker here
 * (UPSTREAM_WORKER_IN_WEB=false); the test plays the dead process and starts the surviving one.
 */
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { createLogger } from '../../platform/logger.js';
import { WebhooksRepository } from '../../features/webhooks/repository.js';
import { startWebhookWorker } from '../../features/webhooks/worker/worker.js';
import { recordUserDeleted } from '../helpers/events.js';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newOperator } from '../helpers/principals.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

let receiver: WebhookReceiver;
const h = useHarness(
  test,
  async () => {
    receiver = await startWebhookReceiver();
    return { env: { UPSTREAM_WORKER_IN_WEB: 'false', WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_DISPATCH_INTERVAL_MS: '100' } };
  },
  { afterStop: () => receiver.close() },
);

test.serial('an attempt claimed by a process that died is made again after its lease, with the same webhook-id', async (t) => {
  const admin = await newOperator(h, { role: 'administrator' });
  const created = await client(h.url).post('/webhooks/endpoints', { token: admin.token, json: { url: `${receiver.url}/survivor`, events: ['user.deleted'] } });
  t.is(created.status, 201);

  const repo = new WebhooksRepository(h.deps.db);
  const eventId = await h.deps.db.transaction((trx) => recordUserDeleted(h.deps.db, randomUUID(), trx));
  const [deliveryId] = await repo.dispatchEvents(10);
  // The dead process: attempt 1 claimed (its log row says pending), never sent, never finished.
  t.truthy(await repo.claimAttempt(deliveryId!, 1, 60_000));
  const worker = await startWebhookWorker(h.config, {
    db: h.deps.db,
    logger: createLogger({ level: 'silent' }),
    keyRing: h.deps.keyRing,
  });
  try {
    await new Promise((r) => setTimeout(r, 500));
    t.is(receiver.on('/survivor').length, 0, 'nothing while the lease runs');
    // The lease runs out (60 s in real time: moved instead of waited for).
    await h.deps
      .db('webhook_deliveries')
      .where({ id: deliveryId })
      .update({ nextAttemptAt: new Date(Date.now() - 1000) });
    const [w] = await receiver.waitFor('/survivor', 1);
    t.is(w!.headers['webhook-id'], eventId);
    t.is((new Webhook(created.body.secret).verify(w!.body, w!.headers) as { type: string }).type, 'user.deleted');
    await new Promise((r) => setTimeout(r, 300));
    const log = await client(h.url).get(`/webhooks/endpoints/${created.body.endpoint.id}/deliveries`, { token: admin.token });
    t.deepEqual(
      log.body.items.map((a: { attempt: number; status: string; error: string | null }) => [a.attempt, a.status, a.error]),
      [
        [2, 'succeeded', null],
        [1, 'failed', 'interrupted: no outcome was recorded (process stopped)'],
      ],
      'the lost attempt is logged as failed; the second one succeeded',
    );
  } finally {
    await worker.close();
  }
});

test.serial('events past WEBHOOK_RETENTION_DAYS go with their log, unless a delivery is still pending', async (t) => {
  const repo = new WebhooksRepository(h.deps.db);
  const admin = await newOperator(h, { role: 'administrator' });
  await client(h.url).post('/webhooks/endpoints', { token: admin.token, json: { url: `${receiver.url}/retention`, events: ['user.deleted'] } });
  const old = new Date(Date.now() - (h.config.webhooks.retentionDays + 1) * 86_400_000);
  const [done, pending, recent] = await Promise.all([0, 1, 2].map(() => recordUserDeleted(h.deps.db, randomUUID())));
  await repo.dispatchEvents(100);
  await h.deps.db('webhook_events').whereIn('id', [done!, pending!]).update({ createdAt: old });
  await h.deps.db('webhook_deliveries').whereIn('eventId', [done!, recent!]).update({ status: 'succeeded' });
  t.true((await h.deps.db('webhook_deliveries').where({ eventId: pending!, status: 'pending' })).length > 0, 'the pending one has a pending delivery');
  await repo.purgeEvents(h.config.webhooks.retentionDays);
  const left = (await h.deps.db('webhook_events').whereIn('id', [done!, pending!, recent!]).select('id')).map((r: { id: string }) => r.id).sort();
  t.deepEqual(left, [pending!, recent!].sort());
  t.is((await h.deps.db('webhook_deliveries').where({ eventId: done! })).length, 0, 'its deliveries went with it');
});

test.serial(
  "an endpoint deleted while an attempt's outcome is recorded: the recording waits for the deletion and then writes nothing; the DELETE answers 204",
  async (t) => {
    const admin = await newOperator(h, { role: 'administrator' });
    const created = await client(h.url).post('/webhooks/endpoints', {
      token: admin.token,
      json: { url: `${receiver.url}/deleted-mid-attempt`, events: ['user.deleted'] },
    });
    t.is(created.status, 201);
    const endpointId = created.body.endpoint.id as string;
    const repo = new WebhooksRepository(h.deps.db);
    await h.deps.db.transaction((trx) => recordUserDeleted(h.deps.db, randomUUID(), trx));
    await repo.dispatchEvents(10);
    // This endpoint's delivery (the event goes to every endpoint subscribed to it).
    const { id: deliveryId } = (await h.deps.db('webhook_deliveries').where({ endpointId, status: 'pending' }).first('id')) as { id: string };
    const claim = (await repo.claimAttempt(deliveryId, 1, 60_000))!;
    t.truthy(claim);
    // The deletion's first step, held open: the endpoint's row locked as DELETE locks it.
    const deletion = await h.deps.db.transaction();
    try {
      await deletion('webhook_endpoints').where({ id: endpointId }).forUpdate().first();
      let recorded = false;
      const finishing = repo
        .finishAttempt(claim, { status: 'succeeded', responseStatus: 200, error: null, durationMs: 5, next: 'final' })
        .then(() => (recorded = true));
      await new Promise((r) => setTimeout(r, 300));
      // Recording the attempt first (its row, then the delivery's) while the deletion then took the
      // delivery and waited for the attempt was the deadlock: it waits at the endpoint's row instead.
      t.false(recorded, 'the outcome was written under a deletion in progress');
      await deletion('webhook_endpoints').where({ id: endpointId }).del();
      await deletion.commit();
      await finishing;
      t.true(recorded);
    } finally {
      if (!deletion.isCompleted()) await deletion.rollback();
    }
    t.is(await h.deps.db('webhook_deliveries').where({ id: deliveryId }).first(), undefined, 'the delivery went with its endpoint');
    t.is((await h.deps.db('webhook_delivery_attempts').where({ deliveryId }).count({ n: '*' }).first())!.n, '0');
    // And through the API, with attempts recorded beside it: 204, the endpoint gone.
    const again = await client(h.url).post('/webhooks/endpoints', {
      token: admin.token,
      json: { url: `${receiver.url}/deleted-mid-attempt`, events: ['user.deleted'] },
    });
    const del = await client(h.url).delete(`/webhooks/endpoints/${again.body.endpoint.id}`, { token: admin.token });
    t.is(del.status, 204, del.text);
  },
);
