/**
 * The balancer of the high-availability layout (the HAProxy configuration that `npm run start:ha`
 * writes, scripts/lib/ha/haproxy.ts) in front of two web processes, one of them killed with SIGKILL
 * while a request is in flight on it. The client talks to the balancer over a kept-alive connection
 * (as browsers, mobile HTTP stacks and Node's fetch do): an earlier request was answered on it.
 * A write in flight on the dead process is answered 503 with Retry-After (never a closed connection);
 * a read is run again on the other process and answered 200.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { startHaproxy } from '../scripts/lib/ha/haproxy.js';
import { freePort } from '../scripts/lib/private-services.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A stand-in web process: /health answers 200; /slow is never answered by the process started with
// `hang` (it says on stdout that it holds the request, the test then kills it); everything else
// answers which process served it and the X-Forwarded-For it received.
const SERVER = `
const http = require('node:http');
const [port, name, hang] = process.argv.slice(1);
http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    if (req.url === '/slow' && hang === 'hang') { process.stdout.write('holding ' + req.method + '\\n'); return; }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ server: name, method: req.method, url: req.url, xff: req.headers['x-forwarded-for'] ?? null }));
  });
}).listen(Number(port), '127.0.0.1', () => process.stdout.write('listening\\n'));
`;

function startServer(port: number, name: string, hang: boolean): Promise<ChildProcess & { holding: Promise<string> }> {
  const child = spawn(process.execPath, ['-e', SERVER, String(port), name, hang ? 'hang' : ''], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  let onHold: (m: string) => void = () => {};
  const holding = new Promise<string>((r) => (onHold = r));
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('listening')) resolve(Object.assign(child, { holding }));
      const m = out.match(/holding (\w+)/);
      if (m) onHold(m[1]!);
    });
    child.once('exit', () => reject(new Error(`${name} exited before listening`)));
  });
}

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: string;
  reusedSocket: boolean;
}

/** One request on the agent's kept-alive connection; rejects when the connection ends without an answer. */
function request(agent: http.Agent, port: number, method: string, urlPath: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body: text, reusedSocket: req.reusedSocket }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('a request in flight on a web process killed with SIGKILL: a write gets 503 with Retry-After, a read is answered by the other process', async (t) => {
  t.timeout(60_000);
  const dir = mkdtempSync(path.join(tmpdir(), 'faceid-haproxy-'));
  const [webPort, pgPort, portA, portB] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const survivor = await startServer(portB, 'b', false);
  let victim = await startServer(portA, 'a', true);
  const logs: string[] = [];
  const balancer = startHaproxy({
    dir,
    webPort,
    pgPort,
    webs: [
      { name: 'web-a', port: portA },
      { name: 'web-b', port: portB },
    ],
    postgres: [],
    log: (l) => logs.push(l),
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    // Both processes in service (checked every second) before the faults.
    const bothUp = async () => {
      const seen = new Set<string>();
      for (let i = 0; i < 100 && seen.size < 2; i++) {
        const a = await request(agent, webPort, 'GET', '/who').catch(() => undefined);
        if (a?.status === 200) seen.add((JSON.parse(a.body) as { server: string }).server);
        else await sleep(100);
      }
      return seen.size === 2;
    };
    t.true(await bothUp(), 'both web processes in service');

    // The client's address reaches the web process once, as the right-most X-Forwarded-For entry.
    const who = await request(agent, webPort, 'GET', '/who');
    t.is((JSON.parse(who.body) as { xff: string }).xff, '127.0.0.1');

    /** Sends `method /slow` until the victim holds it (round robin: at most a few tries), then kills it. */
    const inFlightOnKilled = async (method: string) => {
      for (let i = 0; i < 4; i++) {
        const pending = request(agent, webPort, method, '/slow', method === 'GET' ? undefined : '{"n":1}');
        const held = await Promise.race([victim.holding.then(() => true), pending.then(() => false)]);
        if (!held) continue; // served by the survivor
        victim.kill('SIGKILL');
        return pending;
      }
      throw new Error(`${method} /slow never reached the victim`);
    };

    const write = await inFlightOnKilled('POST').catch((e: Error) => e);
    t.false(write instanceof Error, `the write got an answer, not ${String(write)}`);
    if (!(write instanceof Error)) {
      t.true(write.reusedSocket, 'sent on a kept-alive connection');
      t.is(write.status, 503);
      t.is(write.retryAfter, '2');
      // The service's own error shape and code, as every route documents them.
      t.like(JSON.parse(write.body), { error: 'dependency_unavailable' });
      t.is(typeof (JSON.parse(write.body) as { message: unknown }).message, 'string');
    }

    // The victim comes back (its supervisor restarts it) and the same for a read.
    victim = await startServer(portA, 'a', true);
    t.true(await bothUp(), 'the restarted process back in service');
    const read = await inFlightOnKilled('GET').catch((e: Error) => e);
    t.false(read instanceof Error, `the read got an answer, not ${String(read)}`);
    if (!(read instanceof Error)) {
      t.true(read.reusedSocket, 'sent on a kept-alive connection');
      t.is(read.status, 200);
      t.like(JSON.parse(read.body), { server: 'b', method: 'GET', url: '/slow' });
    }
    // The client's connection stays usable.
    t.is((await request(agent, webPort, 'GET', '/who')).status, 200);
  } finally {
    agent.destroy();
    balancer.kill('SIGKILL');
    victim.kill('SIGKILL');
    survivor.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    if (!t.passed) t.log(logs.join('\n'));
  }
});
