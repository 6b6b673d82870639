/**
 * A worker adds the next stage of the same request itself (liveness → embed → search), under the id
 * its caller chose and awaits (JobClient.start `followOns`), with the first job's deadline and reply
 * list: a stage's output goes on without a trip through the API. Then it wakes one more idle worker of
 * that queue (wakeIdleWorker).
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AwaitedJobContract, JobEnvelope } from '../jobs/contract.js';
import { JOB_CONTRACTS, type AwaitedQueueName, type JobContracts } from '../jobs/index.js';

/**
 * Adds a follow-on job to `handle` (a handle on `redis`, the connection the handler wrote its side
 * values on: commands on one connection apply in order, so a value is in Redis before its job).
 */
export async function addFollowOn<F extends AwaitedQueueName>(
  redis: Redis,
  handle: Queue,
  name: F,
  jobId: string,
  envelope: JobEnvelope<JobContracts[F]['payload']>,
): Promise<void> {
  const contract = JOB_CONTRACTS[name] as AwaitedJobContract<F, JobContracts[F]['payload']>;
  if (contract.delivery !== 'awaited') throw new Error(`queue "${name}" is deferred: nobody awaits a follow-on there`);
  const added = contract.enqueue(handle, envelope, jobId);
  // The extra wake-up must reach Redis after the add (a worker woken before the job exists finds
  // nothing and blocks again, behind the busy one) and before this process blocks in its next model
  // run. BullMQ writes the add after a few promise steps, all run before any setImmediate callback;
  // the models' runs are themselves setImmediate callbacks (onnxruntime-node), queued after this one.
  const woken = new Promise<void>((resolve, reject) => setImmediate(() => wakeIdleWorker(redis, handle).then(resolve, reject)));
  await Promise.all([added, woken]);
}

/**
 * Wakes one more idle worker of a queue after a follow-on job was added.
 *
 * Why: a worker process runs the face models on its main thread, so while it runs one stage its own
 * workers of the other queues cannot act. Redis hands the wake-up of an add (BullMQ's marker, one
 * `ZADD <queue>:marker 0 "0"` in its add script) to the worker that has been blocked longest; when
 * that is the adding process's own worker, the follow-on job would wait until the process's stage is
 * done, although another process sat idle. A second marker wakes the next blocked worker: whichever
 * of the two moves the job to active first runs it; the other finds nothing and blocks again (one
 * empty `moveToActive`). The marker key is BullMQ's (`queue.keys.marker`); test/face-chain.test.ts
 * fails if a BullMQ upgrade changes how workers are woken.
 */
export async function wakeIdleWorker(redis: Redis, queue: Queue): Promise<void> {
  await redis.zadd(queue.keys.marker, 0, '0');
}
