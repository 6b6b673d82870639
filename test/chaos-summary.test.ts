/**
 * The fault suite's figures (chaos/lib/summary.ts, chaos/lib/procfile.ts): the arithmetic behind
 * docs/reliability.md's tables, checked on made-up samples without running a fault.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import type { Sample } from '../chaos/lib/load.js';
import { cmdline, descendants, parseProcfile } from '../chaos/lib/procfile.js';
import { summarise } from '../chaos/lib/summary.js';

const s = (at: number, kind: Sample['kind'], status: number, ms: number, retryAfter: string | null = status === 503 ? '5' : null): Sample => ({
  at,
  kind,
  status,
  ms,
  retryAfter,
});

test('a phase: in flight at the fault, fail-fast while away, recovery from the fault and from the return', (t) => {
  const faultAt = 10_000;
  const backAt = 15_000;
  const r = summarise(
    [
      s(9_000, 'identify', 200, 500), // before: done before the fault
      s(9_900, 'identify', 503, 10_050), // in flight: held by the dead worker until the job timeout
      s(10_100, 'preferences', 200, 20), // needs no worker
      s(11_500, 'identify', 503, 40), // away: refused at once
      s(12_000, 'identify', 503, 1_200, null), // away: refused slowly, without Retry-After
      s(14_000, 'identify', 0, 13_000), // no answer: a hang
      s(15_200, 'identify', 200, 800), // the first 200 after the return
      s(15_100, 'verify-face', 500, 30),
    ],
    { faultAt, backAt, kinds: ['identify'], hangMs: 12_000 },
  );
  t.is(r.requests, 8);
  t.is(r.other5xx, 1);
  t.is(r.unavailable, 3);
  t.is(r.unavailableWithoutRetryAfter, 1);
  t.is(r.hangs, 1);
  t.is(r.slowestMs, 13_000);
  t.deepEqual(r.inFlightAtFault, { requests: 1, statuses: { 'identify 503': 1 }, slowestMs: 10_050 });
  t.deepEqual(r.whileAway, { requests: 3, statuses: { 'identify 503': 2, 'identify 0': 1 }, unavailable: 2, slowest503Ms: 1_200, over1s503: 1 });
  t.is(r.recoveryMs, 15_200 + 800 - faultAt);
  t.is(r.recoveryAfterBackMs, 1_000);
  t.is(r.statuses['identify 200'], 2);
});

test('a phase without a known return: away until the first 200; no 200 at all is no recovery', (t) => {
  const r = summarise([s(10_500, 'identify', 200, 100)], { faultAt: 10_000, kinds: ['identify'], hangMs: 12_000 });
  t.is(r.recoveryMs, 600);
  t.is(r.recoveryAfterBackMs, null);
  t.is(r.whileAway.requests, 0);
  const none = summarise([s(10_500, 'identify', 503, 10)], { faultAt: 10_000, kinds: ['identify'], hangMs: 12_000 });
  t.is(none.recoveryMs, null);
});

test('the Procfile is read as a process manager reads it, and a process tree is found through /proc', async (t) => {
  t.deepEqual(parseProcfile('# comment\nrelease: npm run migrate\n\nweb: exec node --import tsx processes/web.ts\n'), [
    { name: 'release', command: 'npm run migrate' },
    { name: 'web', command: 'exec node --import tsx processes/web.ts' },
  ]);
  t.throws(() => parseProcfile('not a line'));
  const child = spawn('sh', ['-c', 'sleep 30 & wait'], { stdio: 'ignore' });
  try {
    let found: number[] = [];
    for (let i = 0; i < 50 && !found.length; i++) {
      await new Promise((r) => setTimeout(r, 50));
      found = descendants(child.pid!).filter((p) => cmdline(p) === 'sleep 30');
    }
    t.is(found.length, 1);
  } finally {
    for (const p of descendants(child.pid!)) process.kill(p, 'SIGKILL');
    child.kill('SIGKILL');
  }
});
