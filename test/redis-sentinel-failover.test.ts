/**
 * Redis through Sentinel: a private master + replica + 3 Sentinels (scripts/lib/ha/redis-sentinel.ts).
 * After a failover (asked of a Sentinel, then the new master killed with SIGKILL) the connections made
 * from REDIS_SENTINELS follow the new master: a queue worker (platform/worker-runtime/run-queue.ts) keeps consuming
 * jobs added after the switch and the caller (shared/job-client.ts) gets their replies; a plain
 * connection (tokens, rate limits) writes to the new master. The known traps: bullmq #3088, #4378,
 * #4585 (a worker that silently stops consuming after a master switch).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { loadConfig } from '../processes/config.js';
import { JobClient } from '../platform/face-path/job-client.js';
import { createLogger } from '../platform/logger.js';
import { createRedis, redisTarget } from '../platform/redis/redis.js';
import { SingleUseTokens } from '../platform/redis/single-use-token.js';
import { runQueues, type HandlerMap } from '../platform/worker-runtime/run-queue.js';
import { startSentinelTopology } from '../scripts/lib/ha/redis-sentinel.js';
import { testRedisPrefix } from './helpers/db.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('after a Sentinel failover, and after the new master is killed, workers keep consuming and writes reach the new master', async (t) => {
  t.timeout(60_000);
  const dir = mkdtempSync(path.join(tmpdir(), 'faceid-sentinel-'));
  const topo = await startSentinelTopology({ dir, name: 'faceid-test', downAfterMs: 1000, failoverTimeoutMs: 3000, appendOnly: false });
  const config = loadConfig({
    NODE_ENV: 'test',
    REDIS_SENTINELS: topo.sentinelList,
    REDIS_SENTINEL_NAME: 'faceid-test',
    REDIS_PREFIX: testRedisPrefix(),
  });
  const target = redisTarget(config.redis);
  t.like(target, { name: 'faceid-test', sentinels: topo.sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })) });

  const served: number[] = [];
  const handlers = {
    // The port of the server the worker's own connection is on when it runs the job.
    search: async (payload: { n: number }, ctx: { redis: typeof redis }) => {
      served.push(payload.n);
      return { n: payload.n, port: Number((await ctx.redis.info('server')).match(/tcp_port:(\d+)/)?.[1]) };
    },
  } as unknown as HandlerMap<'search'>;
  const redis = createRedis(target);
  redis.on('error', () => {});
  const runner = await runQueues(config, ['search'], handlers, { logger: createLogger({ level: 'silent' }), concurrency: 2 });
  const jobs = new JobClient({ redisUrl: target, redisPrefix: config.redis.prefix, timeoutMs: 3000 });
  let n = 0;
  const ask = () => jobs.run('search', { n: ++n } as never) as Promise<unknown> as Promise<{ n: number; port: number }>;
  // Until the clients have followed the switch a job may fail (503): how long that lasts is measured.
  // A connection that has not yet heard of the switch may still read from the old master (now a
  // replica; its writes get READONLY and are resent after a reconnect): wait for an answer from a
  // worker on the new master.
  const answersAgain = async (port: number, deadlineMs: number) => {
    const from = Date.now();
    while (Date.now() - from < deadlineMs) {
      const reply = await ask().catch(() => undefined);
      if (reply?.port === port) return { reply, afterMs: Date.now() - from };
      await sleep(100);
    }
    throw new Error(`no answer from a worker on port ${port} within ${deadlineMs} ms`);
  };
  const tokenWrite = async (key: string) => {
    for (let i = 0; i < 50; i++) {
      try {
        await redis.set(key, 'v', 'EX', 60);
        return Number((await redis.info('server')).match(/tcp_port:(\d+)/)?.[1]);
      } catch {
        await sleep(100);
      }
    }
    throw new Error('no write reached a master');
  };
  try {
    t.is((await ask()).port, topo.master.port, 'before: served on the first master');
    t.is(await tokenWrite(`${config.redis.prefix}:k0`), topo.master.port);

    // 1. An orderly failover: the old master stays up and turns replica (READONLY, UNBLOCKED).
    await topo.failover();
    const second = await topo.waitForNewMaster(topo.master.port, 15_000);
    t.is(second, topo.replica.port);
    const afterFailover = await answersAgain(second, 10_000);
    t.log(`first answer ${afterFailover.afterMs} ms after the switch`);
    for (let i = 0; i < 5; i++) t.is((await ask()).port, second);
    t.is(await tokenWrite(`${config.redis.prefix}:k1`), second);

    // 2. The new master dies (SIGKILL) right after answering: a single-use token it issued, and one
    //    it saw taken, are on the node the Sentinels promote (WAIT 1 before answering).
    for (let i = 0; i < 100 && !/slave0:.*state=online/.test(await redis.info('replication')); i++) await sleep(100);
    t.regex(await redis.info('replication'), /slave0:.*state=online/, 'the demoted master replicates from the new one');
    const tokens = new SingleUseTokens<[]>(redis, (hash) => `${config.redis.prefix}:t:${hash}`);
    const held = await tokens.issue('held', 300, []);
    const used = await tokens.issue('used', 300, []);
    t.like(await tokens.take(used, []), { value: 'used' });
    // issue and take wait up to REPLICA_ACK_TIMEOUT_MS for the replica, then answer anyway (a master left
    // alone must not turn one failure into an outage); a loaded machine can take longer than that, so the
    // test waits for the replica itself before the kill: what it checks is that what the replica holds is
    // what the promoted node serves.
    t.true((await redis.wait(1, 5000)) >= 1, 'the replica has the tokens before the kill');
    topo.replica.child.kill('SIGKILL');
    const third = await topo.waitForNewMaster(second, 20_000);
    t.is(third, topo.master.port);
    const afterKill = await answersAgain(third, 15_000);
    t.log(`first answer ${afterKill.afterMs} ms after the switch`);
    for (let i = 0; i < 5; i++) t.is((await ask()).port, third);
    t.is(await tokenWrite(`${config.redis.prefix}:k2`), third);
    t.like(await tokens.take(held, []), { value: 'held' }, 'the token issued before the kill is still there');
    t.is(await tokens.take(used, []), null, 'the token taken before the kill stays taken');
    t.true(served.length >= n - 2, 'every answered job was run by the worker');
  } finally {
    const bounded = (p: Promise<unknown>) => Promise.race([p.catch(() => {}), sleep(5000)]);
    await bounded(jobs.close());
    await bounded(runner.close());
    redis.disconnect();
    await topo.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
