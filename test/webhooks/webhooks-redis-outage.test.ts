/**
 * The outbox against a Redis outage (a private redis-server, stopped and started for real; the shared
 * one is never touched): an event whose change commits while Redis is down is written with the change
 * (PostgreSQL), waits there, and is delivered once Redis is back, although Redis comes back empty
 * (every queued job lost).
 */
import test from 'ava';
import { Webhook } from 'standardwebhooks';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newOperator } from '../helpers/principals.js';
import { startPrivateRedis, type PrivateRedis } from '../../scripts/lib/private-services.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

let redis: PrivateRedis;
let receiver: WebhookReceiver;
const h = useHarness(
  test,
  async () => {
    redis = await startPrivateRedis();
    receiver = await startWebhookReceiver();
    return {
      env: {
        REDIS_URL: redis.url,
        WEBHOOK_ALLOW_PRIVATE: 'true',
        WEBHOOK_DISPATCH_INTERVAL_MS: '100',
        WEBHOOK_RETRY_SCHEDULE_SECONDS: '1',
      },
    };
  },
  {
    afterStop: async () => {
      await receiver.close();
      await redis.stop();
    },
  },
);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test.serial('an event written while Redis is down is delivered after it returns, once', async (t) => {
  const api = client(h.url);
  const admin = await newOperator(h, { role: 'administrator' });
  const created = await api.post('/webhooks/endpoints', { token: admin.token, json: { url: `${receiver.url}/hook`, events: ['operator.deactivated'] } });
  t.is(created.status, 201);
  const secret: string = created.body.secret;

  // Delivery works with Redis up (and the worker is connected).
  await api.delete(`/operators/${(await newOperator(h)).operatorId}`, { token: admin.token });
  await receiver.waitFor('/hook', 1);

  await redis.stop();
  const victim = await newOperator(h);
  const change = await api.delete(`/operators/${victim.operatorId}`, { token: admin.token });
  t.is(change.status, 200, 'the change itself needs no Redis');
  const event = await h.deps.db('webhook_events').where({ type: 'operator.deactivated' }).whereRaw("data->>'operatorId' = ?", [victim.operatorId]).first();
  t.truthy(event, 'the event was written with the change');
  await sleep(1500);
  t.is(receiver.on('/hook').length, 1, 'nothing delivered while Redis is down');
  t.truthy(await h.deps.db('webhook_deliveries').where({ eventId: event.id, status: 'pending' }).first(), 'the delivery waits in PostgreSQL');

  await redis.start(); // empty: nothing of the queue survived
  const [, delivered] = await receiver.waitFor('/hook', 2, 30_000);
  t.is(delivered!.headers['webhook-id'], event.id);
  t.deepEqual((new Webhook(secret).verify(delivered!.body, delivered!.headers) as { data: unknown }).data, { operatorId: victim.operatorId });
  await sleep(1500);
  t.is(receiver.on('/hook').length, 2, 'delivered once');
  t.is((await h.deps.db('webhook_deliveries').where({ eventId: event.id }).first()).status, 'succeeded');
});
