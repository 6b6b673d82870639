/**
 * The balancer of `npm run start:ha -- --hosts` (the HAProxy configuration of scripts/lib/ha/haproxy.ts)
 * in front of two web processes, each on a host of its own (a network namespace, scripts/lib/ha/hosts.ts),
 * when one host is cut off (`ip link set eth0 down` inside it): it answers nothing, not even a reset.
 *   - the requests in flight on the cut host are answered within the 10 s of SPEC 13.2: a write 503
 *     with Retry-After and the service's error body, a read run again on the other process (200);
 *   - the requests that keep arriving are all answered 200 by the other process: none ends without an
 *     answer (a stream the balancer killed while it was still connecting to the cut host used to close
 *     the client's connection: "socket hang up"), none waits for the cut host's checks to fail.
 * Every request goes over kept-alive client connections (as browsers, mobile stacks and fetch do).
 * Needs root and `ip netns` (skipped elsewhere) and Debian's haproxy.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { startHaproxy } from '../scripts/lib/ha/haproxy.js';
import { canMakeHosts, makeHosts, setLink, type HostNetwork } from '../scripts/lib/ha/hosts.js';
import { freePort } from '../scripts/lib/private-services.js';

const enabled = canMakeHosts().ok && spawnSync('sh', ['-c', 'command -v haproxy || test -x /usr/sbin/haproxy']).status === 0;
const maybe = enabled ? test : test.skip;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** SPEC 13.2: the service answers again within 10 s of a web host's cut. */
const BOUND_MS = 10_000;
const PORT = 3000;

// A stand-in web process on its host's address: /health answers 200; /slow is held (never answered)
// by the process started with `hold`, which says so on stdout; everything else answers at once.
const SERVER = `
const http = require('node:http');
const [host, port, name, hold] = process.argv.slice(1);
http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.url === '/slow' && hold === 'hold') { process.stdout.write('holding ' + req.method + '\\n'); return; }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ server: name, method: req.method }));
  });
}).listen(Number(port), host, () => process.stdout.write('listening\\n'));
`;

interface Answer {
  status: number;
  retryAfter: string | undefined;
  body: string;
  ms: number;
}

/** One request on a kept-alive connection of `agent`; an Error when the connection ends without an answer. */
function request(agent: http.Agent, port: number, method: string, urlPath: string): Promise<Answer | Error> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, method, path: urlPath, agent, headers: method === 'GET' ? {} : { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body: text, ms: Date.now() - t0 }));
        res.on('error', resolve);
      },
    );
    req.on('error', resolve);
    req.end(method === 'GET' ? undefined : '{"n":1}');
  });
}

maybe(
  'a cut web host: its requests in flight answered within 10 s (503 for a write, 200 from the other host for a read), every new request answered 200',
  async (t) => {
    t.timeout(90_000);
    const dir = mkdtempSync(path.join(tmpdir(), 'faceid-haproxy-cut-'));
    const tag = `t${process.pid % 1000}`;
    let network: HostNetwork | undefined;
    const children: ChildProcess[] = [];
    const logs: string[] = [];
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    try {
      network = makeHosts(['web-a', 'web-b'], { tag, subnetIndex: 100 + (process.pid % 100) });
      const net = network;
      const holding: string[] = [];
      const start = (name: 'web-a' | 'web-b', hold: boolean) =>
        new Promise<void>((resolve, reject) => {
          const [command, args] = net.inHost(name, process.execPath, ['-e', SERVER, net.host(name).address, String(PORT), name, hold ? 'hold' : '']);
          const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
          children.push(child);
          child.stdout!.on('data', (d: Buffer) => {
            for (const line of d.toString().split('\n')) {
              if (line === 'listening') resolve();
              if (line.startsWith('holding ')) holding.push(line.slice('holding '.length));
            }
          });
          child.once('exit', () => reject(new Error(`${name} exited`)));
        });
      await Promise.all([start('web-a', true), start('web-b', false)]);
      const webPort = await freePort();
      const balancer = startHaproxy({
        dir,
        webPort,
        pgPort: await freePort(),
        webs: (['web-a', 'web-b'] as const).map((name) => ({ name, host: net.host(name).address, port: PORT })),
        postgres: [],
        log: (l) => logs.push(l),
      });
      children.push(balancer);

      // Both in service: answers from both, on the kept-alive connections.
      const seen = new Set<string>();
      for (let i = 0; i < 100 && seen.size < 2; i++) {
        const a = await request(agent, webPort, 'GET', '/who');
        if (!(a instanceof Error) && a.status === 200) seen.add((JSON.parse(a.body) as { server: string }).server);
        else await sleep(100);
      }
      t.is(seen.size, 2, 'both web processes in service');

      // A write and a read held by web-a (round robin: a few tries each).
      const inFlight: { method: string; answer: Promise<Answer | Error> }[] = [];
      for (const method of ['POST', 'GET']) {
        for (let i = 0; i < 6 && !holding.includes(method); i++) {
          const answer = request(agent, webPort, method, '/slow');
          const held = await Promise.race([
            answer.then(() => false),
            (async () => {
              for (let j = 0; j < 50 && !holding.includes(method); j++) await sleep(20);
              return holding.includes(method);
            })(),
          ]);
          if (held) inFlight.push({ method, answer });
        }
      }
      t.deepEqual(
        inFlight.map((x) => x.method),
        ['POST', 'GET'],
        'a write and a read in flight on web-a',
      );

      const cutAt = Date.now();
      setLink(net.host('web-a'), 'down');
      // Requests keep arriving, writes and reads, from the moment of the cut.
      const arriving: Promise<Answer | Error>[] = [];
      for (let i = 0; i < 40; i++) {
        arriving.push(request(agent, webPort, i % 2 ? 'POST' : 'GET', '/who'));
        await sleep(100);
      }

      const [write, read] = await Promise.all(inFlight.map((x) => x.answer.then((a) => ({ a, after: Date.now() - cutAt }))));
      t.false(write!.a instanceof Error, `the write in flight got an answer, not ${String(write!.a)}`);
      if (!(write!.a instanceof Error)) {
        t.is(write!.a.status, 503);
        t.is(write!.a.retryAfter, '2');
        t.like(JSON.parse(write!.a.body), { error: 'dependency_unavailable' });
      }
      t.true(write!.after < BOUND_MS, `the write in flight answered ${write!.after} ms after the cut`);
      t.false(read!.a instanceof Error, `the read in flight got an answer, not ${String(read!.a)}`);
      if (!(read!.a instanceof Error))
        t.like({ status: read!.a.status, ...(JSON.parse(read!.a.body) as object) }, { status: 200, server: 'web-b', method: 'GET' });
      t.true(read!.after < BOUND_MS, `the read in flight answered ${read!.after} ms after the cut`);

      const answers = await Promise.all(arriving);
      const unanswered = answers.filter((a) => a instanceof Error).map(String);
      t.deepEqual(unanswered, [], 'every request sent after the cut got an answer');
      const statuses = answers.map((a) => (a instanceof Error ? 0 : a.status));
      t.deepEqual(
        statuses.filter((s) => s !== 200),
        [],
        'every request sent after the cut answered 200 by web-b',
      );
      setLink(net.host('web-a'), 'up');
    } finally {
      agent.destroy();
      for (const c of children) c.kill('SIGKILL');
      network?.remove();
      rmSync(dir, { recursive: true, force: true });
      if (!t.passed) t.log(logs.join('\n'));
    }
  },
);
