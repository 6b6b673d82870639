/**
 * Redis commands per /identify, by command and by key family (BullMQ's keys against the service's
 * own), counted with MONITOR on a private redis-server: a count, not a time, so the machine's load
 * does not move it.
 *
 *   NODE_ENV=development npx tsx bench/redis-commands.ts
 *   BENCH_RC_IDENTIFIES=40 NODE_ENV=development npx tsx bench/redis-commands.ts
 *
 * System: the harness of the tests (test/helpers/harness.ts): the web process, one face process and one
 * search process in this process, their own database, FAIL_FAST on and the workers' liveness watch on
 * (the production defaults), on a private Redis. One client posts attested identifies of a live
 * fixture face one after another (each one runs liveness → embed → search and writes its SearchLog).
 * The commands that run on timers (blocking reads timing out, liveness beats) are counted over an idle
 * window of the same length and subtracted.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startPrivateRedis } from '../scripts/lib/private-services.js';
import { ROOT, startHarness } from '../test/helpers/harness.js';
import { identifyWithFixture } from '../test/helpers/face-path.js';
import { newOperator } from '../test/helpers/principals.js';
import { monitorCommands, perUnit } from '../test/helpers/redis-commands.js';

const N = Number(process.env.BENCH_RC_IDENTIFIES ?? 20);

export async function measureIdentifyCommands(
  n: number,
): Promise<{ rows: [string, number][]; total: number; statsTotal: number; stats: [string, number][]; outcomes: Record<string, number> }> {
  const redis = await startPrivateRedis();
  const h = await startHarness({ face: true, search: 1, env: { REDIS_URL: redis.url, FAIL_FAST: 'true' } });
  try {
    const op = await newOperator(h);
    for (let i = 0; i < 3; i++) await identifyWithFixture(h, op.token); // warm-up: models, scripts, handles
    const outcomes: Record<string, number> = {};
    const work = await monitorCommands(redis.url, h.config.redis.prefix);
    for (let i = 0; i < n; i++) {
      const { res } = await identifyWithFixture(h, op.token);
      const outcome = res.status === 200 ? String((res.body as { outcome: string }).outcome) : `HTTP ${res.status}`;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
    const during = await work.stop();
    await new Promise((r) => setTimeout(r, 500));
    const idleWatch = await monitorCommands(redis.url, h.config.redis.prefix);
    await new Promise((r) => setTimeout(r, Math.max(2000, during.ms)));
    const idle = await idleWatch.stop();
    return { ...perUnit(during, idle, n), outcomes };
  } finally {
    await h.stop();
    await redis.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('redis-commands.ts')) {
  void readFileSync(path.join(ROOT, 'package.json')); // (the harness's root exists)
  const r = await measureIdentifyCommands(N);
  const family = (k: string) => k.slice(0, k.lastIndexOf(' '));
  const byFamily = new Map<string, number>();
  for (const [k, v] of r.rows) byFamily.set(family(k), (byFamily.get(family(k)) ?? 0) + v);
  const bull = [...byFamily].filter(([f]) => f.startsWith('bull:')).reduce((a, [, v]) => a + v, 0);
  console.log(`${N} identifies one after another: ${JSON.stringify(r.outcomes)}`);
  console.log(`Redis commands per identify: ${r.total.toFixed(1)} (BullMQ keys ${bull.toFixed(1)}, the rest ${(r.total - bull).toFixed(1)})`);
  console.log(`INFO commandstats per identify: ${r.statsTotal.toFixed(1)} (${r.stats.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')})`);
  console.log('\n| key family | per identify |\n|---|---|');
  for (const [f, v] of [...byFamily].sort((a, b) => b[1] - a[1])) console.log(`| ${f} | ${v.toFixed(1)} |`);
  console.log('\n| key family, command | per identify |\n|---|---|');
  for (const [k, v] of r.rows) console.log(`| ${k} | ${v.toFixed(1)} |`);
  process.exit(0);
}
