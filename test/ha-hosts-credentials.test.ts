/**
 * `npm run start:ha -- --hosts` (SPEC 13.2), read from outside: the generated files and the listening
 * sockets of every part.
 *   - no `trust` line in any pg_hba, every PostgreSQL line scram-sha-256, TLS only from the network;
 *   - no part answers without credentials: PostgreSQL (no password, a wrong one, and without TLS),
 *     Redis and the Sentinels (NOAUTH), etcd (no user), Patroni's REST API (a switchover without the
 *     password is 401); the processes' own role is `faceid_app`, not a superuser;
 *   - TLS on every link: PostgreSQL, Redis, etcd (clients, and peers by certificate) and Patroni's REST
 *     API answer nothing in clear and verify against the layout's CA;
 *   - no secret in a file readable by others (var/ha/secrets 0700, every file in it 0600, certificates
 *     included; every file under var/ha holding a secret is 0600), none in layout.json or in the
 *     command's output;
 *   - the balancer and the PostgreSQL proxy each on a host of its own, none in the machine's namespace.
 * It starts the layout itself (a minute or two; it needs root, `ip netns` and the Debian packages of
 * scripts/ensure-ha-tools.sh: skipped where they are not), so it is not for every run of the suite:
 * HA_HOSTS_TEST=1 turns it on.
 */
import test from 'ava';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import tls from 'node:tls';
import path from 'node:path';
import pg from 'pg';
import { ROOT } from './helpers/harness.js';
import { freePort } from '../scripts/lib/private-services.js';
import { canMakeHosts } from '../scripts/lib/ha/hosts.js';
import { SECRET_NAMES } from '../scripts/lib/ha/secrets.js';
import { restCall } from '../scripts/lib/ha/rest.js';

const HA_DIR = path.join(ROOT, 'var', 'ha');
const LAYOUT = path.join(HA_DIR, 'layout.json');
const enabled = process.env.HA_HOSTS_TEST === '1' && canMakeHosts().ok && spawnSync('sh', ['-c', 'command -v patroni && command -v etcd']).status === 0;
const maybe = enabled ? test.serial : test.serial.skip;

interface Node {
  host: string;
  port: number;
  restPort?: number;
  restUrl?: string;
  peerPort?: number;
  url?: string;
  netns?: string;
  pid?: number | null;
}
interface Layout {
  url: string;
  balancer: Node;
  hosts: { caFile: string; machine: string };
  redis: { master: Node; replica: Node; sentinels: Node[] };
  postgres: { primary: Node; standby: Node; proxy: Node };
  etcd: Node[];
  env: Record<string, string>;
}

let ha: ChildProcess | undefined;
let output = '';
let layout: Layout;
const secret = (name: string) => readFileSync(path.join(HA_DIR, 'secrets', name), 'utf8');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test.before(async (t) => {
  if (!enabled) return;
  t.timeout(600_000);
  const port = await freePort();
  ha = spawn(process.execPath, ['--import', 'tsx', 'scripts/start-ha.ts', '--hosts'], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'development', PORT: String(port), LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  ha.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  ha.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  for (let i = 0; i < 600 && !output.includes('[start:ha] ready'); i++) {
    if (ha.exitCode !== null) throw new Error(`start:ha --hosts exited: ${output.slice(-2000)}`);
    await sleep(500);
  }
  if (!output.includes('[start:ha] ready')) throw new Error(`start:ha --hosts not ready: ${output.slice(-2000)}`);
  layout = JSON.parse(readFileSync(LAYOUT, 'utf8')) as Layout;
});

test.after.always(async () => {
  if (!ha || ha.exitCode !== null) return;
  ha.kill('SIGINT');
  await Promise.race([new Promise((r) => ha!.once('exit', r)), sleep(90_000)]);
});

maybe('no trust line: every pg_hba line is scram-sha-256, and from the network only over TLS', (t) => {
  for (const node of ['pg1', 'pg2']) {
    const hba = readFileSync(path.join(HA_DIR, 'postgres', node, 'data', 'pg_hba.conf'), 'utf8');
    const lines = hba.split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'));
    t.true(lines.length > 0, node);
    for (const line of lines) {
      t.notRegex(line, /\btrust\b/, `${node}: ${line}`);
      t.regex(line, /scram-sha-256\s*$/, `${node}: ${line}`);
      if (!line.startsWith('local')) t.regex(line, /^hostssl\s/, `${node}: ${line}`);
    }
  }
});

maybe('PostgreSQL refuses a connection without the password, with a wrong one, and without TLS; the processes log in as faceid_app', async (t) => {
  const { primary, proxy } = layout.postgres;
  const ca = readFileSync(path.join(ROOT, layout.hosts.caFile), 'utf8');
  const attempt = async (config: pg.ClientConfig) => {
    const c = new pg.Client({ ...config, connectionTimeoutMillis: 5000 });
    try {
      await c.connect();
      const r = await c.query('SELECT current_user AS who, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS su');
      return r.rows[0] as { who: string; su: boolean };
    } catch (e) {
      return e as Error;
    } finally {
      await c.end().catch(() => {});
    }
  };
  for (const target of [
    { host: primary.host, port: primary.port },
    { host: proxy.host, port: proxy.port },
  ]) {
    const tls = { ca, rejectUnauthorized: true };
    for (const user of ['postgres', 'faceid_app', 'replicator', 'faceid_owner']) {
      const noPassword = await attempt({ ...target, user, database: 'postgres', ssl: tls });
      t.true(noPassword instanceof Error, `${user} without a password at ${target.host}`);
      const wrong = await attempt({ ...target, user, password: 'not-the-password', database: 'postgres', ssl: tls });
      t.true(wrong instanceof Error && /password authentication failed/.test(wrong.message), `${user} with a wrong password: ${String(wrong)}`);
    }
    const plain = await attempt({ ...target, user: 'faceid_app', password: secret('postgres-app'), database: 'faceid', ssl: false });
    t.true(plain instanceof Error, 'no connection without TLS');
    const app = await attempt({ ...target, user: 'faceid_app', password: secret('postgres-app'), database: 'faceid', ssl: tls });
    t.deepEqual(app, { who: 'faceid_app', su: false });
  }
  // The processes' own settings: faceid_app, TLS verified against the layout's CA.
  t.regex(layout.env.DATABASE_URL!, /^postgres:\/\/faceid_app@[^/]+\/faceid\?sslmode=verify-full&sslrootcert=/);
});

/** One command over a raw TLS (or plain) connection, optionally after AUTH: Redis's own answer, as a client sees it. */
function redisAnswer(node: Node, command: string[], opts: { password?: string; tls?: boolean } = {}): Promise<string> {
  const ca = readFileSync(path.join(ROOT, layout.hosts.caFile));
  const encode = (args: string[]) => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
  return new Promise((resolve) => {
    const socket =
      opts.tls === false
        ? net.connect(node.port, node.host)
        : tls.connect({ host: node.host, port: node.port, ca, servername: undefined, checkServerIdentity: () => undefined });
    let data = '';
    const done = (what: string) => {
      socket.destroy();
      resolve(what);
    };
    socket.setTimeout(3000, () => done(data || 'timeout'));
    socket.on('error', (e) => done(data || `error: ${e.message}`));
    socket.on('close', () => done(data || 'closed'));
    socket.on(opts.tls === false ? 'connect' : 'secureConnect', () => {
      socket.write((opts.password ? encode(['AUTH', opts.password]) : '') + encode(command));
    });
    socket.on('data', (d: Buffer) => {
      data += d.toString('latin1');
      if (data.split('\r\n').length > (opts.password ? 2 : 1)) done(data);
    });
  });
}

maybe('Redis and the Sentinels answer nothing without the password, take TLS only, and answer with the password', async (t) => {
  for (const node of [layout.redis.master, layout.redis.replica]) {
    t.regex(await redisAnswer(node, ['GET', 'x']), /^-NOAUTH/, `data node :${node.port} without a password`);
    t.regex(await redisAnswer(node, ['PING'], { password: 'wrong' }), /^-WRONGPASS/, `data node :${node.port} with a wrong password`);
    t.notRegex(await redisAnswer(node, ['PING'], { tls: false }), /^[+-]/, `data node :${node.port} answered plain text`);
    t.regex(await redisAnswer(node, ['PING'], { password: secret('redis') }), /\+PONG/);
  }
  for (const node of layout.redis.sentinels) {
    t.regex(await redisAnswer(node, ['SENTINEL', 'masters']), /^-NOAUTH/, `sentinel :${node.port} without a password`);
    t.regex(await redisAnswer(node, ['SENTINEL', 'get-master-addr-by-name', 'faceid'], { password: secret('redis') }), /\*2/);
  }
});

maybe(
  "etcd and Patroni's REST API speak TLS only; etcd answers no key without a user, and Patroni's REST API changes nothing without its password",
  async (t) => {
    const caFile = path.join(ROOT, layout.hosts.caFile);
    const member = layout.etcd[0]!;
    t.true(member.url!.startsWith('https://'), member.url);
    const range = JSON.stringify({ key: Buffer.from('/service/').toString('base64'), range_end: Buffer.from('/service0').toString('base64') });
    // Plain HTTP to a TLS port: no answer of etcd's, only Go's TLS server refusing the clear request.
    const plain = await restCall(`http://${member.host}:${member.port}/v3/kv/range`, { method: 'POST', body: range, timeoutMs: 3000 }).then(
      (r) => `${r.status} ${r.text}`,
      (e: Error) => `error ${e.message}`,
    );
    t.regex(plain, /^error |^400 Client sent an HTTP request to an HTTPS server/, `etcd over plain HTTP: ${plain}`);
    // A certificate of another CA is refused (the name and the chain are verified).
    await t.throwsAsync(restCall(`${member.url}/health`, { timeoutMs: 3000 }), { message: /self.signed|unable to verify|certificate/i });
    const res = await restCall(`${member.url}/v3/kv/range`, { method: 'POST', body: range, caFile });
    t.not(res.status, 200, res.text);
    t.regex(res.text, /user name is empty|invalid auth token|permission denied/i);
    // Patroni's own store is v2's: no key there without a user either, and Patroni's user reads its leader.
    const leaderKey = `${member.url}/v2/keys/service/faceid/leader`;
    const anonymous = await restCall(leaderKey, { caFile });
    t.is(anonymous.status, 401, anonymous.text);
    const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
    t.is((await restCall(leaderKey, { caFile, headers: basic('patroni', 'wrong') })).status, 401);
    const asPatroni = await restCall(leaderKey, { caFile, headers: basic('patroni', secret('etcd-patroni')) });
    t.is(asPatroni.status, 200, asPatroni.text);
    t.regex(asPatroni.text, /"value":"pg[12]"/);
    const auth = await restCall(`${member.url}/v3/auth/authenticate`, { method: 'POST', body: JSON.stringify({ name: 'patroni', password: 'wrong' }), caFile });
    t.not(auth.status, 200);
    // The members' own link: a peer must show a certificate of the layout's CA.
    const peer = await new Promise<string>((resolve) => {
      const s = tls.connect({ host: member.host, port: member.peerPort!, ca: readFileSync(caFile), servername: undefined }, () => {
        s.write('GET /members HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      });
      let data = '';
      s.setTimeout(3000, () => (s.destroy(), resolve(data || 'timeout')));
      s.on('data', (d: Buffer) => (data += d.toString()));
      s.on('error', (e) => resolve(data || `error: ${e.message}`));
      s.on('close', () => resolve(data || 'closed'));
    });
    t.notRegex(peer, /^HTTP\/1\.1 200/, `etcd peer port without a client certificate: ${peer.slice(0, 200)}`);

    const { primary, standby } = layout.postgres;
    t.true(primary.restUrl!.startsWith('https://'), primary.restUrl);
    t.is(
      await restCall(`http://${primary.host}:${primary.restPort}/patroni`, { timeoutMs: 3000 }).then(
        (r) => r.status,
        () => 0,
      ),
      0,
      'Patroni REST over plain HTTP',
    );
    t.is((await restCall(`${primary.restUrl}/primary`, { caFile })).status, 200);
    const switchover = (password?: string) =>
      restCall(`${primary.restUrl}/switchover`, {
        method: 'POST',
        headers: password ? { authorization: `Basic ${Buffer.from(`patroni:${password}`).toString('base64')}` } : {},
        body: JSON.stringify({ leader: 'pg-none', candidate: 'pg-none' }),
        caFile,
      });
    t.is((await switchover()).status, 401);
    t.is((await switchover('wrong')).status, 401);
    // With the password the request is read (and refused for the made-up names): it is the password that was missing.
    t.not((await switchover(secret('patroni-rest'))).status, 401);
    t.truthy(standby.restPort);
  },
);

maybe('no secret is readable by others, none is in layout.json or in the output, and every part listens on its host only', (t) => {
  const secretsDir = path.join(HA_DIR, 'secrets');
  t.is(statSync(secretsDir).mode & 0o777, 0o700);
  for (const name of SECRET_NAMES) t.is(statSync(path.join(secretsDir, name)).mode & 0o777, 0o600, name);
  const values = SECRET_NAMES.map(secret);
  // Every file under var/ha: one that holds a secret is 0600 (and in a directory others cannot enter).
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) return walk(p);
      return e.isFile() ? [p] : [];
    });
  // Everything under var/ha/secrets, the CA's and the services' certificates and requests too.
  const underSecrets = walk(secretsDir);
  t.true(underSecrets.some((f) => f.endsWith('.pem')) && underSecrets.some((f) => f.endsWith('.csr')));
  for (const file of underSecrets) t.is(statSync(file).mode & 0o777, 0o600, path.relative(ROOT, file));
  let checked = 0;
  for (const file of walk(HA_DIR)) {
    if (statSync(file).size > 5_000_000) continue; // data files
    const text = readFileSync(file, 'latin1');
    if (!values.some((v) => text.includes(v))) continue;
    checked++;
    t.is(statSync(file).mode & 0o077, 0, `${path.relative(ROOT, file)} holds a secret and is readable by others`);
  }
  t.true(checked >= SECRET_NAMES.length, 'the secrets and the configurations holding them were found');
  const layoutText = readFileSync(LAYOUT, 'utf8');
  for (const v of values) {
    t.false(layoutText.includes(v), 'a secret in layout.json');
    t.false(output.includes(v), "a secret in start:ha's output");
  }
  // Every part listens on its host's address (inside its namespace), not on a wildcard or loopback.
  const parts = [layout.redis.master, layout.redis.replica, ...layout.redis.sentinels, layout.postgres.primary, layout.postgres.standby];
  for (const node of [...parts, layout.balancer, layout.postgres.proxy]) {
    const listening = spawnSync('ip', ['netns', 'exec', node.netns!, 'ss', '-ltnH'], { encoding: 'utf8' }).stdout;
    t.true(listening.includes(`${node.host}:${node.port} `), `${node.host}:${node.port} in ${node.netns}: ${listening}`);
    // The local address column of every socket on the part's port: its host's address only.
    const locals = listening
      .split('\n')
      .map((l) => l.trim().split(/\s+/)[3] ?? '')
      .filter((local) => local.endsWith(`:${node.port}`));
    t.deepEqual([...new Set(locals)], [`${node.host}:${node.port}`], `${node.netns}: ${listening}`);
  }
  t.true(existsSync(LAYOUT));
  t.true(net.isIPv4(layout.hosts.machine));
});

maybe(
  "the balancer and the PostgreSQL proxy each run on a host of its own, none in the machine's namespace, and the service answers there and on PORT of the machine",
  async (t) => {
    const machineNs = readlinkSync('/proc/self/ns/net');
    const { balancer } = layout;
    const { proxy } = layout.postgres;
    const others = [layout.redis.master, layout.redis.replica, ...layout.redis.sentinels, layout.postgres.primary, layout.postgres.standby, ...layout.etcd];
    for (const [what, part] of [
      ['the balancer', balancer],
      ['the PostgreSQL proxy', proxy],
    ] as const) {
      t.truthy(part.netns, `${what} has a namespace`);
      t.truthy(part.pid, `${what} has a pid`);
      t.true(net.isIPv4(part.host) && part.host !== layout.hosts.machine, `${what} at ${part.host}, not the machine's ${layout.hosts.machine}`);
      t.false(
        others.some((o) => o.netns === part.netns || o.host === part.host),
        `${what} shares no host with another part`,
      );
      // From outside: the process itself is in that namespace, not in the machine's.
      t.not(readlinkSync(`/proc/${part.pid}/ns/net`), machineNs, `${what} (pid ${part.pid}) runs in the machine's namespace`);
      t.is(spawnSync('ip', ['netns', 'identify', String(part.pid)], { encoding: 'utf8' }).stdout.trim(), part.netns ?? 'none');
    }
    t.not(balancer.netns, proxy.netns, 'the balancer and the PostgreSQL proxy on two hosts');
    // No HAProxy listens in the machine's own namespace.
    const machineListeners = spawnSync('ss', ['-ltnpH'], { encoding: 'utf8' }).stdout;
    t.notRegex(machineListeners, /"haproxy"/, machineListeners);
    // The service answers at the balancer's address, and on PORT of the machine itself.
    t.is(layout.url, `http://${balancer.host}:${balancer.port}`);
    for (const base of [layout.url, `http://127.0.0.1:${balancer.port}`]) {
      const res = await fetch(`${base}/health`);
      t.is(res.status, 200, base);
    }
  },
);

maybe("the application processes hold faceid_app's credentials only: no owner's, superuser's or etcd/Patroni secret in their environment", (t) => {
  const raw = JSON.parse(readFileSync(LAYOUT, 'utf8')) as Record<string, Array<{ name: string; pid: number | null }>>;
  const pids = ['web', 'face', 'search'].flatMap((kind) => (raw[kind] ?? []).map((p) => [p.name, p.pid] as const)).filter(([, pid]) => pid);
  t.true(pids.length >= 3);
  const forbidden = SECRET_NAMES.filter((n) => n !== 'postgres-app' && n !== 'redis').map((n) => [n, secret(n)] as const);
  for (const [name, pid] of pids) {
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
    t.false(environ.includes('MIGRATION_DATABASE_URL='), `${name} has no MIGRATION_DATABASE_URL`);
    for (const [secretName, value] of forbidden) t.false(environ.includes(value), `${name} holds ${secretName}`);
    t.true(environ.includes(encodeURIComponent(secret('postgres-app'))) || environ.includes(secret('postgres-app')), `${name} has the app role's`);
  }
});

maybe("etcd's peers are pinned to the members' own certificate: another certificate of the layout's CA is refused", (t) => {
  const caFile = path.join(ROOT, layout.hosts.caFile);
  const dir = path.dirname(caFile);
  const [member, peer] = [layout.etcd[0]!, layout.etcd[1]!];
  // etcd also checks that a peer connects from an address its certificate names (SAN), so the probe
  // runs on another member's host: only the certificate then decides.
  const scratch = mkdtempSync(path.join(tmpdir(), 'etcd-peer-'));
  const openssl = (args: string[]) => spawnSync('openssl', args, { encoding: 'utf8' });
  // Same CA, an address the members accept, every usage of theirs: only its name (CN) differs.
  openssl(['req', '-new', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=intruder', '-keyout', `${scratch}/intruder.key`, '-out', `${scratch}/intruder.csr`]);
  writeFileSync(`${scratch}/intruder.ext`, `subjectAltName=IP:${peer.host}\nextendedKeyUsage=serverAuth,clientAuth\n`);
  const signed = openssl([
    'x509',
    '-req',
    '-in',
    `${scratch}/intruder.csr`,
    '-CA',
    caFile,
    '-CAkey',
    path.join(dir, 'ca.key'),
    '-CAcreateserial',
    '-CAserial',
    `${scratch}/ca.srl`,
    '-days',
    '1',
    '-extfile',
    `${scratch}/intruder.ext`,
    '-out',
    `${scratch}/intruder.pem`,
  ]);
  t.is(signed.status, 0, signed.stderr);
  const asPeer = (cert: string, key: string) =>
    spawnSync(
      'ip',
      [
        'netns',
        'exec',
        peer.netns!,
        'timeout',
        '5',
        'openssl',
        's_client',
        '-quiet',
        '-connect',
        `${member.host}:${member.peerPort!}`,
        '-CAfile',
        caFile,
        '-cert',
        cert,
        '-key',
        key,
      ],
      { input: 'GET /members HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', encoding: 'utf8' },
    ).stdout;
  try {
    t.regex(asPeer(path.join(dir, 'etcd.pem'), path.join(dir, 'etcd.key')), /^HTTP\/1\.1 200/, "the members' own certificate");
    t.notRegex(asPeer(`${scratch}/intruder.pem`, `${scratch}/intruder.key`), /HTTP\/1\.1/, 'a certificate of the CA named otherwise is no peer');
    for (const other of ['redis', 'postgres'])
      t.notRegex(asPeer(path.join(dir, `${other}.pem`), path.join(dir, `${other}.key`)), /HTTP\/1\.1/, `${other}'s certificate is no peer`);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});
