/**
 * The thread that keeps a worker process's liveness key in Redis (./worker-liveness.ts `LivenessBeat`):
 * apart from the main thread, which the face models hold for a whole model run. Posts one message
 * after the first write, and one after `stop` (the key deleted).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createRedis, type RedisTarget } from '../redis/redis.js';

const { target, key, ttlMs, everyMs } = workerData as { target: RedisTarget; key: string; ttlMs: number; everyMs: number };
// A refresh that cannot be written within a period is worthless: give up on it, the next one follows.
const redis = createRedis(target, { commandTimeout: everyMs, enableOfflineQueue: false });
redis.on('error', () => {}); // a Redis outage is reported by /health; the key just expires meanwhile

const beat = () =>
  redis.set(key, '1', 'PX', ttlMs).then(
    () => {},
    () => {},
  );

// The first write waits for the connection (the offline queue is off: wait for ready, bounded).
await new Promise<void>((resolve) => {
  if (redis.status === 'ready') return resolve();
  const t = setTimeout(resolve, 2000);
  redis.once('ready', () => {
    clearTimeout(t);
    resolve();
  });
});
await beat();
const timer = setInterval(() => void beat(), everyMs);
parentPort!.on('message', (message) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  void redis
    .del(key)
    .catch(() => {})
    .finally(() => {
      redis.disconnect();
      parentPort!.postMessage('stopped');
    });
});
parentPort!.postMessage('up');
