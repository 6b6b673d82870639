/**
 * The web process of bench/architecture-floor.ts: the committed architecture's least work per face
 * request, with no face work at all. Not meant to be run by hand.
 *
 * Each route does only what the architecture and the security standards oblige every face request to
 * do, each step by the cheapest means the service's own design uses:
 * - Koa and @koa/router, the upload parsed in memory by the service's own multipart middleware
 *   (koa-body + formidable, platform/http/middleware/body.ts);
 * - the caller authorised by one PostgreSQL read (a session row by the hash of its opaque token);
 * - the upload handed to a worker as a Redis value, sealed (AES-256-GCM: a biometric is never in clear
 *   at rest, even for seconds), beside a BullMQ job (attempts 1, removed on
 *   completion, as platform/jobs/contract.ts), its reply awaited on the process's own reply list
 *   (one BLPOP connection, as platform/face-path/job-client.ts);
 * - one durable row written before the answer (the SearchLog row's place), one JSON answer.
 *
 * `POST /single`: one hop (as /verify/self, compared in the web process). `POST /identify`: two hops,
 * the face worker handing the request on to the search worker by a list (as the follow-on list).
 * `/http`, `/auth` and `/hop` stop short of `/single`, to price its steps.
 */
import { createCipheriv, createHash, randomBytes, randomUUID } from 'node:crypto';
import Koa from 'koa';
import Router from '@koa/router';
import { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import pg from 'pg';
import { multipartBody, uploadedFiles } from '../platform/http/middleware/body.js';

const PORT = Number(process.env.FLOOR_PORT);
const REDIS_URL = process.env.FLOOR_REDIS_URL!;
const DATABASE_URL = process.env.FLOOR_DATABASE_URL!;
const PREFIX = 'floor';

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 8 });
const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
const blocking = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
const queue = new Queue('floor-face', { connection: redis, prefix: `${PREFIX}:bull`, streams: { events: { maxLen: 1000 } } });
const replyList = `${PREFIX}:replies:${randomUUID()}`;
const SEAL_KEY = Buffer.from(process.env.FLOOR_SEAL_KEY!, 'hex');

function seal(plain: Buffer): Buffer {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', SEAL_KEY, iv);
  const body = Buffer.concat([c.update(plain), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), body]);
}

// One blocking reader of the reply list for every request in flight, as the service's JobClient.
const waiting = new Map<string, (reply: string) => void>();
void (async () => {
  for (;;) {
    const r = await blocking.blpop(replyList, 0);
    if (!r) continue;
    const { id, result } = JSON.parse(r[1]) as { id: string; result: string };
    waiting.get(id)?.(result);
    waiting.delete(id);
  }
})();

async function handOn(image: Buffer, hops: 1 | 2): Promise<string> {
  const id = randomUUID();
  const reply = new Promise<string>((resolve) => waiting.set(id, resolve));
  const imageKey = `${PREFIX}:handoff:${id}`;
  await redis.set(imageKey, seal(image), 'PX', 10_000);
  await queue.add('floor', { imageKey, replyList, hops }, { jobId: id, attempts: 1, removeOnComplete: true, removeOnFail: true });
  return reply;
}

const router = new Router();
const upload = multipartBody(5 * 1024 * 1024);

const authorise: Koa.Middleware = async (ctx, next) => {
  const bearer = /^Bearer (.+)$/.exec(ctx.get('authorization'))?.[1];
  if (!bearer) return ctx.throw(401);
  const { rows } = await pool.query({
    name: 'session',
    text: 'SELECT user_id FROM floor_sessions WHERE token_hash = $1 AND revoked_at IS NULL',
    values: [createHash('sha256').update(bearer).digest()],
  });
  if (rows.length !== 1) return ctx.throw(401);
  ctx.state.userId = (rows[0] as { user_id: string }).user_id;
  await next();
};

/**
 * The routes, each one step more than the one before, so that the steps' costs are the differences:
 * `/http` the upload parsed and answered; `/auth` authorised first; `/hop` handed to a worker and its
 * reply awaited; `/single` the durable row written before the answer; `/identify` two hops.
 */
const steps = {
  http: { auth: false, hops: 0, write: false },
  auth: { auth: true, hops: 0, write: false },
  hop: { auth: true, hops: 1, write: false },
} as const;
const routes = { ...steps, single: { auth: true, hops: 1, write: true }, identify: { auth: true, hops: 2, write: true } } as const;
for (const [name, step] of Object.entries(routes)) {
  const handler: Koa.Middleware = async (ctx) => {
    const file = uploadedFiles(ctx).file?.[0];
    if (!file) return ctx.throw(400);
    const t = performance.now();
    const result = step.hops ? await handOn(file.data, step.hops as 1 | 2) : `parsed ${file.data.length}`;
    const referenceId = randomUUID();
    if (step.write) {
      await pool.query({
        name: 'log',
        text: 'INSERT INTO floor_log (id, user_id, outcome, latency_ms) VALUES ($1, $2, $3, $4)',
        values: [referenceId, ctx.state.userId as string, result, JSON.stringify({ total: performance.now() - t })],
      });
    }
    ctx.body = { referenceId, outcome: result };
  };
  if (step.auth) router.post(`/${name}`, authorise, upload, handler);
  else router.post(`/${name}`, upload, handler);
}

const app = new Koa();
app.use(router.routes());
app.listen(PORT, '127.0.0.1');
