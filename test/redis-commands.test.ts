/**
 * What one call costs Redis, counted on a private redis-server (INFO commandstats and MONITOR: counts,
 * not times, so the machine's load does not move them).
 *
 * - The fail-fast gate is asked once per call: with FAIL_FAST_SAMPLE_MS=0 every question is a fresh
 *   sample (one CLIENT LIST), so the CLIENT LISTs per call are the questions asked; a sample reads the
 *   awaited queues only (not the deferred ones, whose handles the web process holds too).
 * - A face process that adds a search follow-on does not send it a second wake-up: that process runs
 *   no search worker, so the add's own wake-up already goes to one that is free
 *   (platform/face-path/follow-on.ts).
 * - What a call costs in all: an identify is one BullMQ job (liveness, with its embed in place) and a
 *   search on the follow-on list, a /verify/self one job (its comparison is made in the web process);
 *   the totals fail if a stage's job comes back (docs/performance.md "One job per capture").
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { upsertCanonical } from '../features/face/embeddings-repository.js';
import { hasFace } from '../features/face/face-service.js';
import { startPrivateRedis, type PrivateRedis } from '../scripts/lib/private-services.js';
import { ROOT, useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer, newOperator } from './helpers/principals.js';
import { monitorCommands, perUnit } from './helpers/redis-commands.js';

const photo = (rel: string) => readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', rel));
const file = (rel: string) => ({ data: photo(rel), filename: path.basename(rel), type: 'image/png' });

let redis: PrivateRedis;
let operator: { token: string };
let bush: { userId: string; token: string };

const h = useHarness(
  test,
  async () => {
    redis = await startPrivateRedis();
    return { face: true, search: 1, env: { REDIS_URL: redis.url, FAIL_FAST: 'true', FAIL_FAST_SAMPLE_MS: '0' } };
  },
  {
    ready: async (hh) => {
      operator = await newOperator(hh);
      bush = await newConsumer(hh);
      const a = await hh.deps.face.analyseCapture(photo('lfw/Bush_1.png'), 'single');
      if (!hasFace(a)) throw new Error('no face in the enrolment photo');
      const e = await hh.deps.face.embedCapture(a);
      await upsertCanonical(hh.deps.db, bush.userId, e.embedding, 'link_nin', e.engineVersion);
    },
    afterStop: async () => {
      await redis?.stop();
    },
  },
);

/**
 * Runs `call` `n` times one after another; the Redis commands they cost, by `family COMMAND` and INFO
 * name, and per call net of the timers (blocking reads timing out, liveness beats: counted over an idle
 * window and subtracted, as bench/redis-commands.ts does).
 */
async function countOver(n: number, call: () => Promise<void>) {
  await call(); // warm-up: scripts loaded, handles open
  const watch = await monitorCommands(redis.url, h.config.redis.prefix);
  for (let i = 0; i < n; i++) await call();
  const c = await watch.stop();
  const idleWatch = await monitorCommands(redis.url, h.config.redis.prefix);
  await new Promise((r) => setTimeout(r, Math.max(1500, c.ms)));
  const idle = await idleWatch.stop();
  return { ...c, perCall: perUnit(c, idle, n).total };
}

/**
 * Jobs added to a queue: calls of BullMQ's add scripts on its keys. (Not every script on its keys: a
 * Worker's stall check runs on a timer, every `stalledInterval`, whether or not a job came.)
 */
const bullScripts = (c: { byFamilyCommand: Map<string, number> }, queue: string) =>
  [...c.byFamilyCommand].filter(([k]) => k.startsWith(`bull:${queue}:add`) && k.endsWith(' EVALSHA')).reduce((a, [, v]) => a + v, 0);

test.serial('an identify asks the fail-fast gate once, and its search follow-on costs no second wake-up', async (t) => {
  const n = 4;
  const c = await countOver(n, async () => {
    const res = await client(h.url).post('/identify', { token: operator.token, form: { attestation: 'true', file: file('lfw/Bush_2.png') } });
    t.is(res.status, 200, res.text);
    t.is(res.body.outcome, 'match');
  });
  t.is(c.stats.get('client|list') ?? 0, n, 'one CLIENT LIST (one question to the gate) per identify');
  // The gate samples the queues a call awaits, not the deferred ones whose handles the web process opened.
  // (Their own workers' timed polls, BullMQ scripts, are not the gate's: only its plain reads count.)
  const deferred = [...c.byFamilyCommand].filter(([k]) => /^bull:(upstream|webhooks):(wait|prioritized|active) /.test(k));
  t.deepEqual(deferred, [], 'the gate reads no deferred queue');
  // Wake-ups written by the service itself (ZADD of a queue's marker outside BullMQ's scripts): none,
  // for the search follow-on is added by a face process, and the embed stage has no job.
  const wakeUps = (queue: string) => c.byFamilyCommand.get(`bull:${queue}:marker ZADD`) ?? 0;
  t.is(wakeUps('search'), 0, 'no second wake-up for a search follow-on');
  t.is(bullScripts(c, 'liveness'), n, 'one liveness job per identify');
  t.is(bullScripts(c, 'embed'), 0, 'no embed job: the face process that took the liveness job embeds the face');
  t.is(bullScripts(c, 'search'), 0, 'no search job: the face process puts the search on the follow-on list');
  t.is(c.byFamilyCommand.get('jobs:list LPUSH') ?? 0, n, 'one LPUSH of a search stage per identify');
  t.log(`${c.perCall.toFixed(1)} Redis commands per identify`);
  // 189 with three BullMQ jobs, 130 with two, about 72 with one and the search on the follow-on list;
  // here plus the gate's fresh sample (7), and the watch's polls, more on a slow machine.
  t.true(c.perCall <= 95, `${c.perCall.toFixed(1)} Redis commands per identify (at most 95)`);
});

test.serial('a /verify/self asks the fail-fast gate once', async (t) => {
  const n = 3;
  const c = await countOver(n, async () => {
    const res = await client(h.url).post('/verify/self', { token: bush.token, form: { image: file('lfw/Bush_3.png') } });
    t.is(res.status, 200, res.text);
  });
  t.is(c.stats.get('client|list') ?? 0, n, 'one CLIENT LIST (one question to the gate) per /verify/self');
  t.is(bullScripts(c, 'embed') + bullScripts(c, 'search'), 0, 'one job: the liveness job embeds, the web process compares');
  t.log(`${c.perCall.toFixed(1)} Redis commands per /verify/self`);
  t.true(c.perCall <= 95, `${c.perCall.toFixed(1)} Redis commands per /verify/self (at most 95)`);
});
