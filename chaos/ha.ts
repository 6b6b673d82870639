/**
 * `npm run chaos -- ha`: the high-availability layout (`npm run start:ha`, scripts/start-ha.ts) under
 * the fault suite's bounded load (chaos/lib/load.ts), one SIGKILL after another:
 *   1. the Redis master (the Sentinels promote the replica);
 *   2. the PostgreSQL primary: its node, Patroni and PostgreSQL together (Patroni promotes the
 *      synchronous standby once the leader key expires; HAProxy follows Patroni's `/primary`);
 *   3. one web process (HAProxy sends new requests to the other; the supervisor restarts it);
 *   4. one face process, 5. one search process (the other serves; the supervisor restarts it).
 * With `--hosts` (`npm run chaos -- ha --hosts`) the layout runs across hosts (`start:ha --hosts`) and,
 * before the kills, hosts are cut off from the others (`ip link set eth0 down` in their namespace) and
 * healed: 6. the PostgreSQL primary's host (Patroni promotes the standby once the leader key expires;
 * the cut primary, unable to renew it, demotes itself: fencing, checked from inside its host),
 * 7. the Redis master's host (the Sentinels promote the replica; the old master rejoins as its
 * replica at the heal), 8. one web host (HAProxy's checks take it out), 9. one search host (the other
 * replica of its shard serves; with SEARCH_SHARDS=N, start:ha runs two replicas of every shard).
 * Then every answered write is read back from PostgreSQL (chaos/lib/verify.ts) through the proxy,
 * on the promoted node, and read-your-writes of the search replicas is checked across the fail-over
 * (an /identify sent after a link was answered lists that user). Prints the fault table and one JSON report on stdout; exits 1 when a figure
 * breaks the bar (other 5xx, 503 without Retry-After, hangs, lost writes, no recovery).
 */
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDb } from '../platform/database/db.js';
import { freePort } from '../scripts/lib/private-services.js';
import { setLink } from '../scripts/lib/ha/hosts.js';
import { restStatus } from '../scripts/lib/ha/rest.js';
import { FACE_KINDS, PG_KINDS, failures, finish, healthy, makeLoad, phase, waitFor, type Layout } from './faults.js';
import { HANG_MS, JOB_TIMEOUT_MS, type Kind, type Sample } from './lib/load.js';
import { readYourWrites } from './lib/read-your-writes.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const LAYOUT_FILE = path.join(ROOT, 'var', 'ha', 'layout.json');
const say = (m: string) => console.error(`[chaos:ha] ${m}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const HOSTS = process.argv.includes('--hosts');
/** How long a host stays cut off before it is healed. */
const CUT_MS = Number(process.env.CHAOS_CUT_MS ?? 20_000);
/** CHAOS_FAULTS: only the faults whose names contain one of these (comma-separated), for a closer look at one. */
const ONLY = process.env.CHAOS_FAULTS?.split(',')
  .map((x) => x.trim())
  .filter(Boolean);
const ALL_KINDS: Kind[] = ['identify', 'preferences', 'otp-request', 'otp-verify', 'validate', 'verify-face', 'link', 'verify-self', 'phone', 'delete'];

interface Part {
  port: number;
  pid: number | null;
  host?: string;
  netns?: string;
  link?: string;
  restPort?: number;
  restUrl?: string;
  /** A search part's shard (0 with one shard). */
  shard?: number;
}
interface HaLayout {
  /** The balancer (under `--hosts` on a host of its own: `host` is its address). */
  balancer: Part;
  web: Part[];
  face: Part[];
  search: Part[];
  redis: { master: Part; replica: Part; sentinels: Part[] };
  postgres: { primary: Part & { name: string; patroniPid: number | null }; standby: Part & { name: string }; proxy: Part };
  env: Record<string, string>;
  hosts?: { caFile: string | null };
}
const readLayout = () => JSON.parse(readFileSync(LAYOUT_FILE, 'utf8')) as HaLayout;

/** Under `--hosts` layout.json gives the URLs without passwords: the suite reads them from var/ha/secrets. */
function withPassword(url: string, secret: string): string {
  if (!HOSTS) return url;
  const u = new URL(url);
  u.password = readFileSync(path.join(ROOT, 'var', 'ha', 'secrets', secret), 'utf8');
  return u.toString();
}

/**
 * Whether the PostgreSQL of a cut host still takes writes, asked on its own Unix socket (reachable
 * whatever the state of the host's link): 'fenced' once it is in recovery (Patroni demoted it) or its
 * server is down; 'unknown' when the question itself failed.
 */
function primaryState(node: { name: string }): 'writable' | 'fenced' | 'unknown' {
  const password = readFileSync(path.join(ROOT, 'var', 'ha', 'secrets', 'postgres-superuser'), 'utf8');
  const socketDir = path.join(ROOT, 'var', 'ha', 'postgres', node.name);
  const r = spawnSync('psql', [`host=${socketDir} user=postgres dbname=postgres connect_timeout=2`, '-Atc', 'SELECT pg_is_in_recovery()'], {
    encoding: 'utf8',
    env: { ...process.env, PGPASSWORD: password },
    timeout: 5000,
  });
  if (r.status === 0) return r.stdout.trim() === 'f' ? 'writable' : 'fenced';
  return /No such file|Connection refused|shutting down|starting up|in recovery mode|not yet accepting/i.test(r.stderr ?? '') ? 'fenced' : 'unknown';
}

/** The longest time, within the phase, between two consecutive answers 200 (by when they were answered). */
function longestGapMs(samples: Sample[], from: number, to: number): number {
  const ends = samples
    .filter((s) => s.status === 200 && s.at + s.ms >= from && s.at + s.ms <= to)
    .map((s) => s.at + s.ms)
    .sort((a, b) => a - b);
  let gap = 0;
  let prev = from;
  for (const e of ends) {
    gap = Math.max(gap, e - prev);
    prev = e;
  }
  return Math.max(gap, to - prev);
}

/**
 * From the fault to the first answer 200 (of the routes the fault concerns) that ended after the last
 * failure (no answer, or 5xx) of a request sent after the fault: the time to answer again, not fooled by a request that
 * was answered from a part's last moments.
 */
function answeredAgain(samples: Sample[], kinds: Kind[], faultAt: number, until: number): number | null {
  const end = (x: Sample) => x.at + x.ms;
  const inPhase = samples.filter((x) => x.at >= faultAt - 15_000 && x.at < until);
  // Failures of requests sent after the fault: the part is still away. (A request in flight at the
  // fault may fail later, at its deadline, while the others are answered again: not counted here.)
  const lastBad = Math.max(faultAt, ...inPhase.filter((x) => (x.status === 0 || x.status >= 500) && x.at >= faultAt).map(end));
  const ok = inPhase.filter((x) => kinds.includes(x.kind) && x.status === 200 && end(x) > lastBad).sort((a, b) => end(a) - end(b))[0];
  return ok ? end(ok) - faultAt : null;
}

/** Waits until a connection through the proxy reaches a node out of recovery; returns when. */
async function primaryThroughProxy(url: string, timeoutMs: number): Promise<number> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    try {
      await c.connect();
      const r = await c.query('SELECT pg_is_in_recovery() AS standby');
      if (r.rows[0]?.standby === false) return Date.now();
    } catch {
      // no node in service yet
    } finally {
      await c.end().catch(() => {});
    }
    await sleep(200);
  }
  throw new Error(`no primary through the proxy within ${timeoutMs} ms`);
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'faceid-chaos-ha-'));
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'development',
    PORT: String(port),
    LOG_LEVEL: 'warn',
    REDIS_PREFIX: 'chaos_ha',
    FACE_JOB_TIMEOUT_MS: String(JOB_TIMEOUT_MS),
    SMS_OUTBOX_FILE: path.join(tmp, 'sms-outbox.jsonl'),
    SEARCH_SNAPSHOT_DIR: path.join(tmp, 'search-snapshots'),
    // The load signs many accounts in from one address: the abuse caps would answer 429, not the faults.
    OTP_COOLDOWN_SECONDS: '0',
    OTP_REQUESTS_PER_IP_PER_HOUR: '100000',
    OTP_REQUESTS_PER_PHONE_PER_DAY: '1000',
    VALIDATIONS_PER_USER_PER_HOUR: '1000',
    OPERATOR_LOGINS_PER_IP_PER_HOUR: '100000',
    IDENTIFY_MAX_CANDIDATES: '100',
  };
  for (const k of ['DATABASE_URL', 'REDIS_URL', 'REDIS_SENTINELS', 'SUPERVISOR_STATUS_FILE', 'FACEID_SERVICE_FILE']) delete env[k];
  const report: Record<string, unknown> = {
    startedAt: new Date().toISOString(),
    cores: os.cpus().length,
    loadAverageAtStart: os.loadavg().map((x) => Number(x.toFixed(2))),
  };

  rmSync(LAYOUT_FILE, { force: true });
  const started = Date.now();
  const ha = spawn(process.execPath, ['--import', 'tsx', 'scripts/start-ha.ts', ...(HOSTS ? ['--hosts'] : [])], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  report.hosts = HOSTS;
  // CHAOS_LOG_DIR: the layout's own output (its error logs name the cause of any 5xx).
  const logFile = process.env.CHAOS_LOG_DIR ? createWriteStream(path.join(process.env.CHAOS_LOG_DIR, 'start-ha.log')) : null;
  ha.stderr!.on('data', (d: Buffer) => logFile?.write(d));
  ha.stdout!.on('data', (d: Buffer) => {
    logFile?.write(d);
    for (const line of d.toString().split('\n')) if (line.startsWith('[start:ha]') && !line.includes('haproxy:')) say(line);
  });
  // Under --hosts the load reaches the balancer at its host's address, as a client on the network would.
  let url = `http://127.0.0.1:${port}`;
  let db: ReturnType<typeof createDb> | undefined;
  const rows: { fault: string; figures: Awaited<ReturnType<typeof phase>>; gapMs: number; answeredAgainMs: number | null }[] = [];
  try {
    await waitFor(() => existsSync(LAYOUT_FILE), 300_000, 'var/ha/layout.json');
    const balancerHost = readLayout().balancer.host;
    if (HOSTS && balancerHost) url = `http://${balancerHost}:${port}`;
    report.url = url;
    await waitFor(healthy(url), 300_000, 'start:ha to be healthy');
    report.startupMs = Date.now() - started;
    const layout = readLayout();
    const databaseUrl = withPassword(layout.env.DATABASE_URL!, 'postgres-app');
    db = createDb(databaseUrl, 2, { bindModels: false });
    const l: Layout = { name: HOSTS ? 'ha-hosts' : 'ha', env: { ...env, ...layout.env, DATABASE_URL: databaseUrl }, url, dbName: 'faceid', db };
    /** When each fault was done (read-your-writes is also counted across each). */
    const faultTimes: { name: string; at: number }[] = [];
    const made = await makeLoad(l);
    const load = made.load;
    load.start();

    /** `limitMs`: the contract's bound on the time to answer again (SPEC 12.7). */
    /**
     * `kill` does the fault and may wait until the part is back (`backAt`: the phase then waits for a
     * 200 sent after it, so that a straggler answered just after the fault does not end it early).
     * `limitMs`: the contract's bound on the time to answer again (SPEC 12.7).
     */
    const run = async (
      fault: string,
      kill: (layout: HaLayout) => Promise<{ backAt?: number; notes: Record<string, unknown> }>,
      kinds: Kind[],
      limitMs = 10_000,
    ) => {
      if (ONLY && !ONLY.some((o) => fault.includes(o))) return;
      const phaseStart = Date.now();
      let faultAt = 0;
      const figures = await phase(
        report,
        load,
        fault,
        async () => {
          faultAt = Date.now();
          faultTimes.push({ name: fault, at: faultAt });
          return kill(readLayout());
        },
        kinds,
      );
      // The phase ends once its requests are answered; a 200 after its last failure may still be on its
      // way (a request is recorded when answered): wait for one (a failure meanwhile still counts), up
      // to 30 s, rather than report "none" for an answer a second away.
      let answeredAgainMs = answeredAgain(load.samples, kinds, faultAt, Date.now());
      for (let i = 0; i < 60 && answeredAgainMs === null; i++) {
        await sleep(500);
        answeredAgainMs = answeredAgain(load.samples, kinds, faultAt, Date.now());
      }
      (report[fault] as Record<string, unknown>).answeredAgainMs = answeredAgainMs;
      if (answeredAgainMs === null) failures.push(`${fault}: no 200 after the outage`);
      else if (answeredAgainMs > limitMs) failures.push(`${fault}: answered again after ${answeredAgainMs} ms (bound ${limitMs} ms)`);
      rows.push({ fault, figures, gapMs: longestGapMs(load.samples, phaseStart + 3000, Date.now() - 3000), answeredAgainMs });
      // The layout settles (a killed process restarted, the roles rewritten) before the next fault.
      await sleep(5000);
    };
    // Under --hosts the partitions come first: each cut host rejoins as a replica when healed, so the
    // kills after them still find a standby to promote (start:ha restarts no killed data node).
    if (HOSTS) {
      await run(
        'cut the PostgreSQL primary host',
        async (lay) => {
          const p = lay.postgres.primary;
          // The question works: the primary answers it as writable before the cut.
          const beforeCut = primaryState(p);
          if (beforeCut !== 'writable') failures.push(`the PostgreSQL primary was not seen writable before the cut (${beforeCut})`);
          const cutAt = Date.now();
          setLink(p, 'down');
          // Fencing: the cut primary cannot renew the leader key and must stop taking writes.
          let fencedAfterMs: number | null = null;
          const promotedAt = await Promise.all([
            primaryThroughProxy(databaseUrl, 60_000),
            (async () => {
              for (let i = 0; i < 60 && fencedAfterMs === null; i++) {
                if (primaryState(p) === 'fenced') fencedAfterMs = Date.now() - cutAt;
                else await sleep(500);
              }
            })(),
          ]).then(([at]) => at);
          await sleep(Math.max(0, CUT_MS - (Date.now() - cutAt)));
          setLink(p, 'up');
          if (fencedAfterMs === null) failures.push('the cut PostgreSQL primary still took writes after 30 s (no fencing)');
          // Healed: the old primary rejoins as a replica (pg_rewind) with no other step.
          let rejoinedAfterMs: number | null = null;
          const healedAt = Date.now();
          for (let i = 0; i < 120 && rejoinedAfterMs === null; i++) {
            const caFile = lay.hosts?.caFile ? path.join(ROOT, lay.hosts.caFile) : undefined;
            const role = await restStatus(`${p.restUrl ?? `http://${p.host}:${p.restPort}`}/replica`, { timeoutMs: 1000, caFile });
            if (role === 200) rejoinedAfterMs = Date.now() - healedAt;
            else await sleep(500);
          }
          if (rejoinedAfterMs === null) failures.push('the healed PostgreSQL node did not rejoin as a replica within 60 s');
          return { backAt: promotedAt, notes: { cut: `${p.name} ${p.host}`, promotedAfterMs: promotedAt - cutAt, fencedAfterMs, rejoinedAfterMs } };
        },
        PG_KINDS,
        30_000,
      );
      await run(
        'cut the Redis master host',
        async (lay) => {
          const m = lay.redis.master;
          setLink(m, 'down');
          await sleep(CUT_MS);
          setLink(m, 'up');
          return { notes: { cut: `redis ${m.host}:${m.port}` } };
        },
        FACE_KINDS,
      );
      await run(
        'cut one web host',
        async (lay) => {
          const w = lay.web[0]!;
          setLink(w, 'down');
          await sleep(CUT_MS);
          setLink(w, 'up');
          return { notes: { cut: `web ${w.host}` } };
        },
        ALL_KINDS,
      );
      // A search host: the other replica of its shard serves; a search the cut one had taken answers
      // 503 with Retry-After (at SEARCH_SHARD_TIMEOUT_MS with shards, its job deadline without), never a
      // list that misses its rows (the read-your-writes check below covers every /identify of the run).
      await run(
        'cut one search host',
        async (lay) => {
          const s = lay.search[0]!;
          setLink(s, 'down');
          await sleep(CUT_MS);
          setLink(s, 'up');
          return { notes: { cut: `search ${s.host} (shard ${s.shard ?? 0})` } };
        },
        ['identify'],
      );
    }
    await run(
      'kill -9 Redis master',
      async (lay) => {
        process.kill(lay.redis.master.pid!, 'SIGKILL');
        return { notes: { killed: `redis-server :${lay.redis.master.port}` } };
      },
      FACE_KINDS,
    );
    await run(
      'kill -9 PostgreSQL primary (node: Patroni + PostgreSQL)',
      async (lay) => {
        const killedAt = Date.now();
        const p = lay.postgres.primary;
        // The node's process group: runuser, Patroni and the PostgreSQL it started.
        if (p.patroniPid) process.kill(-p.patroniPid, 'SIGKILL');
        if (p.pid)
          try {
            process.kill(p.pid, 'SIGKILL');
          } catch {
            /* gone with its group */
          }
        // Back when the proxy leads to a node out of recovery (the promoted standby).
        const promotedAt = await primaryThroughProxy(databaseUrl, 60_000);
        return { backAt: promotedAt, notes: { killed: `${p.name} :${p.port}`, promotedAfterMs: promotedAt - killedAt } };
      },
      PG_KINDS,
      30_000,
    );
    await run(
      'kill -9 one web process',
      async (lay) => {
        process.kill(lay.web[0]!.pid!, 'SIGKILL');
        return { notes: { killed: `web :${lay.web[0]!.port}` } };
      },
      ALL_KINDS,
    );
    await run(
      'kill -9 one face process',
      async (lay) => {
        process.kill(lay.face[0]!.pid!, 'SIGKILL');
        return { notes: { killed: `face :${lay.face[0]!.port}` } };
      },
      FACE_KINDS,
    );
    await run(
      'kill -9 one search process',
      async (lay) => {
        process.kill(lay.search[0]!.pid!, 'SIGKILL');
        return { notes: { killed: `search :${lay.search[0]!.port}` } };
      },
      ['identify'],
    );
    await load.identifyOnce();
    await load.stop();
    // Every request of the run, those sent between two faults included (the phases count only the
    // requests sent within them): none unanswered or slower than HANG_MS, none answered 5xx but 503
    // with Retry-After.
    const all = load.samples;
    report.wholeRun = {
      requests: all.length,
      unansweredOrSlow: all.filter((x) => x.status === 0 || x.ms > HANG_MS).length,
      other5xx: all.filter((x) => x.status >= 500 && x.status !== 503).length,
      unavailableWithoutRetryAfter: all.filter((x) => x.status === 503 && !x.retryAfter).length,
    };
    const whole = report.wholeRun as Record<string, number>;
    if (whole.unansweredOrSlow || whole.other5xx || whole.unavailableWithoutRetryAfter) failures.push(`over the whole run: ${JSON.stringify(report.wholeRun)}`);
    // The read-back goes through the proxy to whichever node is primary now.
    await db.destroy();
    db = createDb(databaseUrl, 2, { bindModels: false });
    await finish(report, { ...l, db }, load);
    const ryw = readYourWrites(load.writes, faultTimes, Number(env.IDENTIFY_MAX_CANDIDATES));
    // A missed user's stored state says what to look at: deleted (when), or live and not found.
    const missedState = ryw.missedUsers.length
      ? await db('users')
          .whereIn(
            'id',
            ryw.missedUsers.map((m) => m.userId),
          )
          .select('id', 'deletedAt')
      : [];
    report.readYourWrites = {
      ...ryw,
      missedUsers: ryw.missedUsers.map((m) => ({
        ...m,
        deletedAt: (missedState.find((u: { id: string }) => u.id === m.userId) as { deletedAt: Date | null } | undefined)?.deletedAt ?? null,
      })),
    };
    say(`read-your-writes of the search replicas: ${JSON.stringify(report.readYourWrites)}`);
    if (ryw.missed) failures.push(`an /identify sent after a link was answered did not list that user (${JSON.stringify(report.readYourWrites)})`);
    report.finalLayout = readLayout();
  } catch (e) {
    failures.push(`the suite itself failed: ${e instanceof Error ? e.stack : String(e)}`);
  } finally {
    await db?.destroy().catch(() => {});
    ha.kill('SIGINT');
    // At most a minute for the layout to stop; the timer must not keep the suite alive once it has.
    let giveUp: NodeJS.Timeout | undefined;
    await Promise.race([new Promise((r) => ha.once('exit', r)), new Promise((r) => (giveUp = setTimeout(r, 60_000)))]);
    clearTimeout(giveUp);
    rmSync(tmp, { recursive: true, force: true });
  }
  const lost = (report.lostWrites as { lost?: number } | undefined)?.lost;
  const table = [
    '| fault | longest gap without a 200 | 503 (all with Retry-After?) | other 5xx | hangs | time to answer again |',
    '|---|---|---|---|---|---|',
    ...rows.map(
      ({ fault, figures: f, gapMs, answeredAgainMs }) =>
        `| ${fault} | ${(gapMs / 1000).toFixed(1)} s | ${f.unavailable} (${f.unavailableWithoutRetryAfter === 0 ? 'yes' : `${f.unavailableWithoutRetryAfter} without`}) | ${f.other5xx} | ${f.hangs} | ${answeredAgainMs === null ? 'none' : `${(answeredAgainMs / 1000).toFixed(1)} s`} |`,
    ),
    '',
    `answered writes lost (read back after all faults): ${lost ?? 'not checked'}`,
  ].join('\n');
  report.loadAverageAtEnd = os.loadavg().map((x) => Number(x.toFixed(2)));
  report.failures = failures;
  console.error(`\n${table}\n`);
  console.log(JSON.stringify({ ...report, table }, null, 2));
  if (failures.length) process.exitCode = 1;
}

await main();
// A phase that failed can leave a load client or a pool open: the report is out, so end here (stdout is a
// file or a pipe, both written synchronously on Linux) rather than hold the machine's CPU lock.
process.exit();
