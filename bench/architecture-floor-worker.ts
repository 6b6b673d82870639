/**
 * A worker process of bench/architecture-floor.ts, with no face work: `FLOOR_ROLE=face` takes the
 * BullMQ job, takes its sealed upload from Redis, opens it and answers (or hands the request on to the search list);
 * `FLOOR_ROLE=search` takes requests from that list and answers. Not meant to be run by hand.
 */
import { createDecipheriv } from 'node:crypto';
import { Redis } from 'ioredis';
import { Worker } from 'bullmq';

const REDIS_URL = process.env.FLOOR_REDIS_URL!;
const PREFIX = 'floor';
const SEARCH_LIST = `${PREFIX}:list:search`;
// What crosses to the search stage: a 512-float embedding, as the follow-on stage's probe.
const EMBEDDING = Buffer.alloc(512 * 4, 7).toString('base64');

const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
const SEAL_KEY = Buffer.from(process.env.FLOOR_SEAL_KEY!, 'hex');

function open(sealed: Buffer): Buffer {
  const d = createDecipheriv('aes-256-gcm', SEAL_KEY, sealed.subarray(0, 12));
  d.setAuthTag(sealed.subarray(12, 28));
  return Buffer.concat([d.update(sealed.subarray(28)), d.final()]);
}

if (process.env.FLOOR_ROLE === 'search') {
  const blocking = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  for (;;) {
    const r = await blocking.brpop(SEARCH_LIST, 0);
    if (!r) continue;
    const stage = JSON.parse(r[1]) as { id: string; replyList: string; embedding: string };
    await redis.lpush(stage.replyList, JSON.stringify({ id: stage.id, result: `searched ${stage.embedding.length}` }));
  }
} else {
  const worker = new Worker(
    'floor-face',
    async (job) => {
      const { imageKey, replyList, hops } = job.data as { imageKey: string; replyList: string; hops: 1 | 2 };
      const sealed = await redis.getdelBuffer(imageKey);
      const image = sealed ? open(sealed) : null;
      if (hops === 2) await redis.lpush(SEARCH_LIST, JSON.stringify({ id: job.id, replyList, embedding: EMBEDDING }));
      else await redis.lpush(replyList, JSON.stringify({ id: job.id, result: `read ${image?.length ?? 0}` }));
    },
    { connection: new Redis(REDIS_URL, { maxRetriesPerRequest: null }), prefix: `${PREFIX}:bull`, concurrency: 1 },
  );
  worker.on('error', () => {});
}
