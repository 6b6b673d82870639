/**
 * HAProxy (Debian `haproxy`) in front of the web processes and of PostgreSQL, one process, one file.
 *
 * PostgreSQL: one address for the application; a server is in service only while its Patroni answers
 * 200 on `GET /primary` (so after a failover the proxy sends connections to the promoted standby, and
 * it cuts the sessions still open to a server that is marked down).
 * Web: round robin over the web processes, checked on `GET /health`; a request
 * that cannot reach a web process is sent to another (`retry-on conn-failure`: nothing was sent), and
 * so is a GET or HEAD whose process died before answering (`empty-response`); a write is never
 * replayed: a write in flight on a process that dies is answered 503 with Retry-After, on a
 * kept-alive client connection too (two stages, see `web-requests`). The proxy's own error answers
 * (no server in service, a server that died mid-request) are 503 with Retry-After and the service's
 * error body (errorfiles).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

export interface Backend {
  name: string;
  /** Its address (default 127.0.0.1; its host's address under `--hosts`). */
  host?: string;
  port: number;
  /** Port of the health check when it is not the server's own. */
  checkPort?: number;
  /** The check speaks TLS and verifies the server's certificate against this CA (Patroni's REST API under `--hosts`)... */
  checkCaFile?: string;
  /** ...and that the certificate names this host (HAProxy compares DNS names, not addresses). */
  checkName?: string;
}

export interface HaproxyOptions {
  dir: string;
  /** The user HAProxy drops to once its config, errorfiles and ports are taken (started as root). */
  user?: string;
  webPort: number;
  /** Where the web address listens (default 127.0.0.1; the balancer's host address under `--hosts`). */
  webBind?: string;
  webs: Backend[];
  pgPort: number;
  /** Where the PostgreSQL address listens (default 127.0.0.1; the machine's address on the hosts' subnet under `--hosts`). */
  pgBind?: string;
  postgres: Backend[];
  /**
   * One of the two roles alone (under `--hosts` the balancer and the PostgreSQL proxy are two
   * HAProxies, each on a host of its own); both by default (one process on one machine).
   */
  only?: 'web' | 'postgres';
  /** The configuration's file name in `dir` (default haproxy.cfg). */
  file?: string;
  /** Runs the command elsewhere (inside a host's network namespace): `[command, args]` to spawn. */
  wrap?: (command: string, args: string[]) => [string, string[]];
  log?: (line: string) => void;
}

const RETRY_AFTER_SECONDS = 2;

function errorFile(dir: string, status: number): string {
  const file = path.join(dir, `error-${status}.http`);
  // The service's own error shape (`{ error, message }`) and the code every route documents for a
  // backing part that is away, so that a client handles the balancer's 503 like the service's.
  const body = JSON.stringify({ error: 'dependency_unavailable', message: 'The service is briefly unavailable: retry after the delay given.' });
  writeFileSync(
    file,
    [
      'HTTP/1.1 503 Service Unavailable',
      'Content-Type: application/json',
      `Retry-After: ${RETRY_AFTER_SECONDS}`,
      'Cache-Control: no-store',
      'Connection: close',
      `Content-Length: ${Buffer.byteLength(body)}`,
      '',
      body,
    ].join('\r\n'),
  );
  return file;
}

/** The in-process address between the two web stages (Linux abstract socket, one per balancer port). */
const webStage = (webPort: number) => `abns@faceid-webs-${webPort}`;

/** A backend of the web processes; `check`: its health check. */
function webBackend(o: HaproxyOptions, name: string, check: string[]): string[] {
  return [
    `backend ${name}`,
    '  mode http',
    // A fresh server connection per request: after a web process dies, the next request finds its
    // port closed (a connection failure, retried on the other process whatever the method) instead of
    // being sent down a kept-alive connection to the dead process. Costs one loopback/LAN connect.
    '  option http-server-close',
    '  balance roundrobin',
    ...check,
    '  retries 3',
    // A request that reached a process which then died without answering is run again on the other
    // process only when it is safe to repeat (GET, HEAD); a write might have been applied before the
    // process died: it is answered 503 with Retry-After (the service's single-use tokens refuse a
    // replay of a write that was applied).
    '  retry-on conn-failure empty-response',
    '  http-request disable-l7-retry unless METH_GET || METH_HEAD',
    '  option redispatch 1',
    ...[502, 503, 504].map((s) => `  errorfile ${s} ${path.join(o.dir, `error-${s}.http`)}`),
    // A web process whose host is cut off answers nothing, not even a reset. The requests waiting on
    // it end through TCP keepalive: its kernel answers the probes while it lives, however slowly it
    // serves, so only a host that is gone fails them (after 1 s idle, 3 probes 1 s apart: about 4 s);
    // the connection then fails, and the request is answered 503 with Retry-After (a GET or HEAD is
    // run again on the other process). Not `timeout server`: a healthy request may take the whole
    // face deadline (FACE_JOB_TIMEOUT_MS) and more. Not `on-marked-down shutdown-sessions`: it also
    // kills the requests still connecting to that host, and a stream killed before it reached a
    // server gives no answer at all (HAProxy logs `D---` and closes the client's connection).
    '  option srvtcpka',
    '  srvtcpka-idle 1s',
    '  srvtcpka-intvl 1s',
    '  srvtcpka-cnt 3',
    // A connect to a web process takes a LAN round trip; one that is not answered within 500 ms is
    // given up and sent to the other process (`retries`, `redispatch`), and the first such failure
    // of real traffic takes the process out of service at once (`observe layer4`), before its checks
    // fail, so the following requests go to the other process directly. `fastinter`: once a check
    // has failed, the next comes sooner. A process that is back is in service after one good check.
    '  timeout connect 500ms',
    '  default-server inter 1s fastinter 500ms fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down',
    ...o.webs.map((w) => `  server ${w.name} ${w.host ?? '127.0.0.1'}:${w.port} check`),
    '',
  ];
}

export function haproxyConfig(o: HaproxyOptions): string {
  const web = o.only !== 'postgres';
  const postgres = o.only !== 'web';
  return [
    'global',
    // Requests up to 256 KB (a capture photo) are read whole before they go to a web process
    // (`http-buffer-request`): when that process dies mid-request the client, having sent everything,
    // reads the 503; with part of its upload unread, closing the connection would reset it instead.
    '  tune.bufsize 262144',
    '  maxconn 2000',
    // Only what went wrong (a server dying mid-request, no server, a cut connection) is logged.
    '  log stderr format raw local0 warning',
    ...(o.user ? [`  user ${o.user}`, `  group ${o.user}`] : []),
    '',
    'defaults',
    '  log global',
    '  option dontlog-normal',
    // Traffic logs are at level info, below the `warning` above: errors (5xx, a server that died
    // mid-request, termination flags like SH--) are raised to err so that they are the ones kept.
    '  option log-separate-errors',
    '  timeout connect 2s',
    '  timeout client 60s',
    '  timeout server 60s',
    '  timeout check 1s',
    '',
    ...(web ? webSections(o) : []),
    ...(postgres ? postgresSection(o) : []),
  ].join('\n');
}

/** The balancer: the web address, its two stages and the web processes. */
function webSections(o: HaproxyOptions): string[] {
  return [
    'frontend web',
    '  mode http',
    '  option httplog',
    `  bind ${o.webBind ?? '127.0.0.1'}:${o.webPort}`,
    '  option forwardfor',
    ...[502, 503, 504].map((s) => `  errorfile ${s} ${errorFile(o.dir, s)}`),
    '  default_backend web-requests',
    '',
    // Two stages in the one process. HAProxy answers a request whose server died before answering
    // only when it is the FIRST on its client connection; on a kept-alive client connection (every
    // browser, mobile stack and Node's fetch after its first request) it closes the connection
    // without an answer and without a log line, so that the client retries: a write in flight on a
    // killed web process then ends as "socket hang up" at the client, not as a 503. So the client's
    // kept-alive connection ends here, and each request goes on a fresh in-process connection
    // (`http-server-close`; an abstract socket, no port, no file) to the stage below, where it is the
    // first on its connection and a dead server becomes the 502 that the errorfiles turn into a 503
    // with Retry-After. Clients keep their connections (and TLS sessions) across requests.
    'backend web-requests',
    '  mode http',
    '  option http-buffer-request',
    '  option http-server-close',
    // Longer than the stage below, which answers its own timeouts.
    '  timeout server 65s',
    // What the stage below answers it has logged already (with the server's termination flags).
    '  http-response set-log-level silent',
    ...[502, 503, 504].map((s) => `  errorfile ${s} ${path.join(o.dir, `error-${s}.http`)}`),
    `  server webs ${webStage(o.webPort)}`,
    '',
    'frontend webs',
    '  mode http',
    '  option httplog',
    // No `option forwardfor` here: the client's address is added once, above, as the right-most
    // X-Forwarded-For entry the web processes trust (TRUST_PROXY).
    `  bind ${webStage(o.webPort)}`,
    // Health polls (orchestrators, start-up waits) would fill the log with the 503 of a process starting.
    '  http-request set-log-level silent if { path /health }',
    // Requests up to 256 KB (a capture photo) are read whole before they go to a web process.
    '  option http-buffer-request',
    ...[502, 503, 504].map((s) => `  errorfile ${s} ${path.join(o.dir, `error-${s}.http`)}`),
    // The processes that can serve now (their own links answer: /health/ready) take the traffic. Only
    // when none can (PostgreSQL or Redis away for all of them) does it go to every live process: they
    // still serve what does not need the missing part, and answer the rest 503 with Retry-After.
    // A process back from a cut link is live at once but silent on its old connections for a while:
    // it takes traffic again once they answer, not at its first check.
    '  use_backend webs-ready if { nbsrv(webs-ready) gt 0 }',
    '  default_backend webs-live',
    '',
    ...webBackend(o, 'webs-ready', ['  option httpchk GET /health/ready', '  http-check expect status 200']),
    // /health answers 503 while a dependency is down: the process still serves, so both count as alive.
    ...webBackend(o, 'webs-live', ['  option httpchk GET /health', '  http-check expect rstatus ^(200|503)$']),
  ];
}

/** The PostgreSQL proxy: one address, the server Patroni calls primary. */
function postgresSection(o: HaproxyOptions): string[] {
  return [
    'listen postgres',
    '  mode tcp',
    // `tcp-ut` (TCP_USER_TIMEOUT): a connection whose data toward the client stays unacknowledged
    // 5 s is ended (see the keepalive below for the idle case).
    `  bind ${o.pgBind ?? '127.0.0.1'}:${o.pgPort} tcp-ut 5s`,
    '  timeout client 30m',
    '  timeout server 30m',
    // A client host cut off in the middle of a transaction answers nothing: its session would hold
    // its row locks until the link came back, and every request wanting those rows would wait as long.
    // TCP keepalive toward the clients (answered by a live host's kernel whatever its process does)
    // ends such a connection about 5 s after it went silent; PostgreSQL then rolls the transaction back.
    // Keepalive probes are only sent on an idle connection: a host cut while a result was on its way
    // to it leaves that result unacknowledged, the kernel retransmits it for many minutes, and the
    // session held its locks until the heal (a /verify/self waited > 20 s behind the cut host's
    // DELETE of the same user). The user timeout on `bind` ends that one after 5 s; a live host's
    // kernel acknowledges at once however slowly its process reads.
    '  option clitcpka',
    '  clitcpka-idle 2s',
    '  clitcpka-intvl 1s',
    '  clitcpka-cnt 3',
    '  option httpchk GET /primary',
    '  http-check expect status 200',
    '  default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions',
    ...o.postgres.map(
      (p) =>
        `  server ${p.name} ${p.host ?? '127.0.0.1'}:${p.port} check port ${p.checkPort}` +
        (p.checkCaFile ? ` check-ssl verify required ca-file ${p.checkCaFile}${p.checkName ? ` verifyhost ${p.checkName}` : ''}` : ''),
    ),
    '',
  ];
}

/** Debian's `haproxy` user when running as root: the balancer faces clients, so it keeps no root. */
function haproxyUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  return spawnSync('id', ['-u', 'haproxy']).status === 0 ? 'haproxy' : undefined;
}

export function startHaproxy(o: HaproxyOptions): ChildProcess {
  const file = path.join(o.dir, o.file ?? 'haproxy.cfg');
  writeFileSync(file, haproxyConfig({ user: haproxyUser(), ...o }));
  const [command, args] = o.wrap ? o.wrap('haproxy', ['-db', '-f', file]) : ['haproxy', ['-db', '-f', file]];
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr?.on('data', (d: Buffer) => o.log?.(`haproxy: ${d.toString().trim()}`));
  return child;
}
