/**
 * How an awaited job's result travels back to the API process that awaits it: a reply list per API
 * process, instead of BullMQ's per-queue events stream.
 *
 * Why: BullMQ publishes 4-5 events per job (`added`, `waiting`, `active`, `completed`, `drained`) into
 * one stream per queue, and every API process reading that stream woke up, parsed and re-issued its
 * XREAD for each of them: 15.7 wake-ups per /identify, 12 of them for events nobody awaited, and every
 * result copied into a stream that outlives the job (docs/performance.md §4). With a reply list, each
 * job costs its API process exactly one wake-up (its own result), and results never enter the events
 * stream: the worker returns nothing to BullMQ.
 *
 * - The API (./job-client.ts) names its list in each job's envelope (`replyTo`) and pops it with
 *   one blocking BLPOP connection.
 * - The runner (platform/worker-runtime/run-queue.ts, through ./serve-awaited.ts) pushes `{ id, ok, result | error }` when the handler returns or
 *   throws, and gives the list a TTL so that the list of an API process that died goes away on its own.
 * - A job skipped after its deadline gets no reply: its caller has already answered 503.
 */
import type { Redis } from 'ioredis';

/** What a worker pushes to the caller's reply list. */
export type JobReply = { id: string; ok: true; result: unknown } | { id: string; ok: false; error: string };

/** The reply list of one API process (under the deployment's REDIS_PREFIX). */
export const replyListKey = (redisPrefix: string, clientId: string) => `${redisPrefix}:jobs:reply:${clientId}`;

/**
 * How long a reply list outlives its last push: longer than any awaited job's deadline, so a live
 * caller never loses one; short, so a dead caller's replies do not linger.
 */
export const REPLY_LIST_TTL_MS = 60_000;

/**
 * Pushes a job's reply (one round trip: RPUSH and PEXPIRE pipelined), deleting `done` (the job's runner
 * key, ./worker-liveness.ts) in the same round trip. Several replies (a job's own, then those of the
 * stages it ran in place: ./serve-awaited.ts `answer`) go in one RPUSH, in order.
 */
export async function pushReply(redis: Redis, replyTo: string, reply: JobReply | JobReply[], done?: string): Promise<void> {
  const values = (Array.isArray(reply) ? reply : [reply]).map((r) => JSON.stringify(r));
  const pipeline = redis
    .pipeline()
    .rpush(replyTo, ...values)
    .pexpire(replyTo, REPLY_LIST_TTL_MS);
  if (done) pipeline.del(done);
  const results = await pipeline.exec();
  const failed = results?.find(([err]) => err);
  if (failed) throw failed[0];
}

/** Parses one popped reply; null for anything that is not a reply (never throws). */
export function parseReply(raw: string): JobReply | null {
  try {
    const r = JSON.parse(raw) as Partial<JobReply>;
    if (typeof r?.id !== 'string' || typeof r.ok !== 'boolean') return null;
    return r as JobReply;
  } catch {
    return null;
  }
}
