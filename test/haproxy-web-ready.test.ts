/**
 * The balancer of the high-availability layout (scripts/lib/ha/haproxy.ts) sends the traffic to the web
 * processes that can serve now (`GET /health/ready` 200: their own links to PostgreSQL and Redis
 * answer), and to every live process only when none can (a part away for all of them: they still
 * serve what does not need it). A process back from a cut link answers /health like the others but
 * is silent on its old connections for a while: it takes no traffic until its readiness says so.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { startHaproxy } from '../scripts/lib/ha/haproxy.js';
import { freePort } from '../scripts/lib/private-services.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A stand-in web process: /health answers 503 (a part away, as every process says then);
// /health/ready answers 200 or 503 as set by `PUT /ready/<0|1>` on its own port; anything else
// answers which process served it.
const SERVER = `
const http = require('node:http');
const [port, name] = process.argv.slice(1);
let ready = true;
http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.method === 'PUT' && req.url.startsWith('/ready/')) { ready = req.url.endsWith('/1'); res.end(); return; }
    if (req.url === '/health') { res.statusCode = 503; res.end('{}'); return; }
    if (req.url === '/health/ready') { res.statusCode = ready ? 200 : 503; res.end('{}'); return; }
    res.end(JSON.stringify({ server: name }));
  });
}).listen(Number(port), '127.0.0.1', () => process.stdout.write('listening\\n'));
`;

function startServer(port: number, name: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', SERVER, String(port), name], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('listening')) resolve(child);
    });
    child.once('exit', () => reject(new Error(`${name} exited before listening`)));
  });
}

/** Which processes served `n` requests through the balancer. */
async function servedBy(port: number, n: number): Promise<string[]> {
  const seen: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch(`http://127.0.0.1:${port}/who`).catch(() => undefined); // the balancer starting
    seen.push(!res ? 'no answer' : res.status === 200 ? ((await res.json()) as { server: string }).server : `status ${res.status}`);
  }
  return [...new Set(seen)].sort();
}

/** Waits (at most 10 s) until `n` requests are served by exactly `expected`; returns what served the last round. */
async function settlesOn(port: number, expected: string[]): Promise<string[]> {
  let got: string[] = [];
  for (let i = 0; i < 50; i++) {
    got = await servedBy(port, 6);
    if (JSON.stringify(got) === JSON.stringify(expected)) return got;
    await sleep(200);
  }
  return got;
}

test('traffic goes to the web processes whose links answer; to every live one only when none does', async (t) => {
  t.timeout(60_000);
  const dir = mkdtempSync(path.join(tmpdir(), 'faceid-haproxy-ready-'));
  const [webPort, pgPort, portA, portB] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const servers = [await startServer(portA, 'a'), await startServer(portB, 'b')];
  const setReady = (port: number, ready: boolean) => fetch(`http://127.0.0.1:${port}/ready/${ready ? 1 : 0}`, { method: 'PUT' });
  const balancer = startHaproxy({
    dir,
    webPort,
    pgPort,
    webs: [
      { name: 'web-a', port: portA },
      { name: 'web-b', port: portB },
    ],
    postgres: [],
  });
  try {
    t.deepEqual(await settlesOn(webPort, ['a', 'b']), ['a', 'b'], 'both ready: both serve');
    await setReady(portA, false);
    t.deepEqual(await settlesOn(webPort, ['b']), ['b'], "a not ready (its /health as b's): only b serves");
    await setReady(portB, false);
    t.deepEqual(await settlesOn(webPort, ['a', 'b']), ['a', 'b'], 'neither ready: both live ones serve');
    await setReady(portA, true);
    t.deepEqual(await settlesOn(webPort, ['a']), ['a'], 'a ready again: it alone serves');
  } finally {
    balancer.kill('SIGKILL');
    for (const s of servers) s.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
