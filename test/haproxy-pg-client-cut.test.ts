/**
 * The PostgreSQL address of `npm run start:ha -- --hosts` (HAProxy's `listen postgres`,
 * scripts/lib/ha/haproxy.ts) when a client's host is cut off in the middle of a session: the client
 * answers nothing, not even a reset. A session left open would keep its transaction's row locks until
 * the link came back (every other request wanting those rows waiting as long); the balancer ends the
 * connection within the 10 s of SPEC 13.2, so the server rolls the transaction back.
 * Stand-ins: a TCP server in place of PostgreSQL (it reports when its client's connection closes) and a
 * client on a host of its own (a network namespace). Needs root and `ip netns` (skipped elsewhere).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { startHaproxy } from '../scripts/lib/ha/haproxy.js';
import { canMakeHosts, makeHosts, setLink, type HostNetwork } from '../scripts/lib/ha/hosts.js';
import { freePort } from '../scripts/lib/private-services.js';

const enabled = canMakeHosts().ok && spawnSync('sh', ['-c', 'command -v haproxy || test -x /usr/sbin/haproxy']).status === 0;
const maybe = enabled ? test : test.skip;
const BOUND_MS = 10_000;

// The client: connects to the proxy, sends a line (its "transaction"), then says so and stays silent.
const CLIENT = `
const net = require('node:net');
const [host, port] = process.argv.slice(1);
const s = net.connect(Number(port), host, () => { s.write('BEGIN\\n'); });
s.on('data', () => process.stdout.write('open\\n'));
s.on('error', () => {});
setInterval(() => {}, 1000);
`;

/**
 * Cuts the client's host in the middle of its session; `answerAfterCut`: the server answers the client
 * once the link is down, so that the balancer holds data toward the client that is never acknowledged
 * (the cut web process had a query out and its result was on its way). Returns the ms from the cut to
 * the end of the server connection (0: not ended within 15 s).
 */
async function cutClient(answerAfterCut: boolean): Promise<number> {
  const dir = mkdtempSync(path.join(tmpdir(), 'faceid-haproxy-pg-'));
  let network: HostNetwork | undefined;
  const children: ChildProcess[] = [];
  const serverPort = await freePort();
  const checkPort = await freePort();
  let opened: (() => void) | undefined;
  let closedAt = 0;
  let serverSide: net.Socket | undefined;
  const openedOnce = new Promise<void>((r) => (opened = r));
  // The stand-in PostgreSQL: answers the client's first line, notes when the connection closes.
  const server = net.createServer((sock) => {
    serverSide = sock;
    sock.once('data', () => {
      sock.write('ok\n');
      opened?.();
    });
    sock.on('close', () => (closedAt = Date.now()));
    sock.on('error', () => {});
  });
  // Its "Patroni": 200 on /primary, so the balancer keeps it in service.
  const check = net.createServer((sock) => {
    sock.once('data', () => sock.end('HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    sock.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(serverPort, '127.0.0.1', r));
  await new Promise<void>((r) => check.listen(checkPort, '127.0.0.1', r));
  try {
    network = makeHosts(['client'], { tag: `p${process.pid % 1000}`, subnetIndex: 200 + (process.pid % 50) });
    const pgPort = await freePort();
    const balancer = startHaproxy({
      dir,
      webPort: await freePort(),
      webs: [],
      pgPort,
      pgBind: network.gateway,
      postgres: [{ name: 'pg1', port: serverPort, checkPort }],
    });
    children.push(balancer);
    await new Promise((r) => setTimeout(r, 1500)); // listening, the server checked in service
    const [command, args] = network.inHost('client', process.execPath, ['-e', CLIENT, network.gateway, String(pgPort)]);
    const client = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(client);
    await Promise.race([openedOnce, new Promise((_, reject) => setTimeout(() => reject(new Error('the client never reached the server')), 10_000))]);
    await new Promise((r) => setTimeout(r, 500));
    const cutAt = Date.now();
    setLink(network.host('client'), 'down');
    if (answerAfterCut) {
      await new Promise((r) => setTimeout(r, 200));
      serverSide?.write('a result the cut client never acknowledges\n');
    }
    for (let i = 0; i < 150 && !closedAt; i++) await new Promise((r) => setTimeout(r, 100));
    return closedAt ? closedAt - cutAt : 0;
  } finally {
    for (const c of children) c.kill('SIGKILL');
    network?.remove();
    server.close();
    check.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

maybe('a client host cut off in the middle of a session: the balancer ends its server connection within 10 s', async (t) => {
  t.timeout(60_000);
  const endedMs = await cutClient(false);
  t.true(endedMs > 0, 'the server connection of the cut client was ended');
  t.log(`ended ${endedMs} ms after the cut`);
  t.true(endedMs < BOUND_MS, `ended ${endedMs} ms after the cut`);
});

// Keepalive probes are sent on an idle connection only: with an answer unacknowledged, the kernel
// retransmits it for many minutes instead, and the session kept its row locks until the heal.
maybe('a client host cut off while an answer to it is on its way: the balancer ends its server connection within 10 s', async (t) => {
  t.timeout(60_000);
  const endedMs = await cutClient(true);
  t.true(endedMs > 0, 'the server connection of the cut client was ended');
  t.log(`ended ${endedMs} ms after the cut`);
  t.true(endedMs < BOUND_MS, `ended ${endedMs} ms after the cut`);
});
