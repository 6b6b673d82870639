/**
 * Counts the Redis commands a piece of work costs, by command and by key family, from MONITOR on a
 * private redis-server (nobody else's commands in it). The count does not depend on the machine's load
 * except through the commands that run on a timer (blocking reads that time out, liveness beats, the
 * API's runner watch): those are measured over an idle window of the same length and subtracted.
 * Commands run inside BullMQ's Lua scripts are counted too (as INFO commandstats counts them), under
 * the script's key family.
 */
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import * as bullScripts from 'bullmq/dist/esm/scripts/index.js';

/** BullMQ's Lua scripts by the SHA1 an EVALSHA names (as ioredis computes it). */
const SCRIPT_BY_SHA = new Map<string, string>(
  Object.values(bullScripts as unknown as Record<string, { name: string; content: string }>)
    .filter((s) => typeof s?.content === 'string')
    .map((s) => [createHash('sha1').update(s.content).digest('hex'), s.name]),
);

/** Calls by command name from INFO commandstats (which counts what MONITOR does not show: CLIENT, INFO). */
export async function commandStats(redis: Redis): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of (await redis.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

export interface CommandCount {
  /** Every command seen, by `family command`, e.g. `bull:embed:marker ZADD` or `jobs:reply BLPOP`. */
  byFamilyCommand: Map<string, number>;
  total: number;
  /** INFO commandstats calls in the window, by command (the MONITOR and INFO of this counter taken out). */
  stats: Map<string, number>;
  /** Wall time of the window, ms. */
  ms: number;
}

/** Where a key belongs: BullMQ's keys by queue and kind (`bull:embed:job`, `bull:embed:wait`...), the service's by purpose. */
export function keyFamily(key: string | undefined, redisPrefix: string): string {
  if (key === undefined) return '(no key)';
  if (!key.startsWith(`${redisPrefix}:`)) return '(other)';
  const rest = key.slice(redisPrefix.length + 1).split(':');
  if (rest[0] === 'bull') {
    // <queue>:<kind> or <queue>:<job id>[:lock|:logs] under bull:
    const tail = rest.slice(2);
    if (tail.length === 0 || tail[0] === '') return 'bull:(queue prefix)';
    if (/^[0-9a-f-]{36}$/.test(tail[0]!) || /^\d+$/.test(tail[0]!)) return `bull:${rest[1]}:job${tail[1] ? `:${tail[1]}` : ''}`;
    return `bull:${rest[1]}:${tail.join(':')}`;
  }
  if (rest[0] === 'face' || rest[0] === 'jobs' || rest[0] === 'workers') return `${rest[0]}:${rest[1] ?? ''}`;
  return rest[0]!;
}

/** `<queue>:` of a BullMQ key (`<prefix>:bull:<queue>:…`), else nothing. */
function queueOf(key: string | undefined, redisPrefix: string): string {
  const m = key?.startsWith(`${redisPrefix}:bull:`) ? key.slice(redisPrefix.length + 6).split(':')[0] : undefined;
  return m ? `${m}:` : '';
}

/** The first key a command names (EVAL/EVALSHA: its first KEYS argument). */
function firstKey(args: string[]): string | undefined {
  const name = args[0]?.toLowerCase();
  if (name === 'evalsha' || name === 'eval' || name === 'evalsha_ro' || name === 'fcall') return Number(args[2]) > 0 ? args[3] : undefined;
  if (
    name === 'client' ||
    name === 'ping' ||
    name === 'info' ||
    name === 'script' ||
    name === 'hello' ||
    name === 'select' ||
    name === 'multi' ||
    name === 'exec'
  )
    return undefined;
  if (name === 'xread' || name === 'xreadgroup') {
    const i = args.findIndex((a) => a.toLowerCase() === 'streams');
    return i >= 0 ? args[i + 1] : undefined;
  }
  return args[1];
}

/** Watches every command of a Redis server until `stop()`. */
export async function monitorCommands(url: string, redisPrefix: string): Promise<{ stop(): Promise<CommandCount> }> {
  const conn = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: null });
  const info = new Redis(url, { maxRetriesPerRequest: null });
  const stats0 = await commandStats(info);
  const monitor = await conn.monitor();
  const byFamilyCommand = new Map<string, number>();
  let total = 0;
  // A script's own commands are counted under its key family, not the family of each key it touches:
  // what a BullMQ call costs.
  let scriptFamily = '';
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    const name = (args[0] ?? '').toUpperCase();
    const fromScript = source === 'lua' || source.startsWith('lua');
    const script = name === 'EVALSHA' ? `bull:${queueOf(firstKey(args), redisPrefix)}${SCRIPT_BY_SHA.get(args[1] ?? '') ?? 'script'}` : undefined;
    const family = fromScript ? `${scriptFamily} (in script)` : (script ?? keyFamily(firstKey(args), redisPrefix));
    if (script) scriptFamily = script;
    const k = `${family} ${name}`;
    byFamilyCommand.set(k, (byFamilyCommand.get(k) ?? 0) + 1);
    total++;
  });
  const t0 = performance.now();
  return {
    async stop() {
      const ms = performance.now() - t0;
      monitor.disconnect();
      conn.disconnect();
      const stats1 = await commandStats(info);
      info.disconnect();
      const stats = new Map<string, number>();
      for (const [k, v] of stats1) {
        const d = v - (stats0.get(k) ?? 0) - (k === 'info' ? 1 : 0) - (k === 'monitor' ? 1 : 0);
        if (d > 0) stats.set(k, d);
      }
      return { byFamilyCommand, total, stats, ms };
    },
  };
}

/**
 * Commands per unit of work: `(work − idle × work.ms / idle.ms) / units`, by `family command` and in
 * total (negative rows, noise of the timers, are dropped).
 */
export function perUnit(
  work: CommandCount,
  idle: CommandCount,
  units: number,
): { rows: [string, number][]; total: number; statsTotal: number; stats: [string, number][] } {
  const scale = work.ms / idle.ms;
  const keys = new Set([...work.byFamilyCommand.keys(), ...idle.byFamilyCommand.keys()]);
  const rows: [string, number][] = [];
  for (const k of keys) {
    const v = ((work.byFamilyCommand.get(k) ?? 0) - (idle.byFamilyCommand.get(k) ?? 0) * scale) / units;
    if (v >= 0.05) rows.push([k, v]);
  }
  rows.sort((a, b) => b[1] - a[1]);
  const stats: [string, number][] = [];
  for (const k of new Set([...work.stats.keys(), ...idle.stats.keys()])) {
    const v = ((work.stats.get(k) ?? 0) - (idle.stats.get(k) ?? 0) * scale) / units;
    if (v >= 0.05) stats.push([k, v]);
  }
  stats.sort((a, b) => b[1] - a[1]);
  const sum = (c: CommandCount) => [...c.stats.values()].reduce((a, b) => a + b, 0);
  return { rows, total: (work.total - idle.total * scale) / units, statsTotal: (sum(work) - sum(idle) * scale) / units, stats };
}
