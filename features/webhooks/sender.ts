/**
 * The outward HTTP call of a webhook attempt, with its SSRF guard.
 *
 * A webhook URL is chosen by an administrator, but what its name resolves to is chosen by whoever runs
 * that name's DNS, and can change between the check and the call (DNS rebinding). So, unless private
 * targets are allowed (WEBHOOK_ALLOW_PRIVATE, outside production only):
 * - only `https:` is accepted;
 * - the name is resolved when the attempt is sent, inside the connection's own `lookup`, and every
 *   address it resolves to must be public (not loopback, private, link-local, CGNAT, multicast,
 *   reserved, documentation or NAT64; an IPv4-mapped IPv6 address is judged by its IPv4 address, as
 *   net.BlockList does), or inside WEBHOOK_PRIVATE_CIDRS (the explicit allow-list of private receivers);
 *   the connection then goes to exactly the address that was checked;
 * - an address literal in the URL is checked the same way;
 * - redirects are never followed (a 3xx is just a failed attempt).
 * A refused address is logged with a fixed text (REFUSED_ADDRESS), never what the name resolved to.
 * The whole attempt (connect, send, answer) is bounded by `timeoutMs`; only the status is read from the
 * answer (at most 64 KiB of its body is drained, never stored).
 */
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { LookupFunction } from 'node:net';

export interface SendOptions extends TargetPolicy {
  timeoutMs: number;
}

/** Which targets a webhook may reach. */
export interface TargetPolicy {
  /** Any address and plain http (WEBHOOK_ALLOW_PRIVATE; refused in production). */
  allowPrivate: boolean;
  /** Private networks reachable all the same (WEBHOOK_PRIVATE_CIDRS): the explicit allow-list. */
  privateCidrs?: readonly { address: string; prefix: number; family: 'ipv4' | 'ipv6' }[];
}

export interface SendResult {
  /** The HTTP status, or null when no answer came (refused address, timeout, connection error). */
  status: number | null;
  error: string | null;
  durationMs: number;
}

export class BlockedTargetError extends Error {
  /**
   * `address`: the target's address is not one a webhook may reach (the API's answer to a literal names
   * it; what a name resolved to is never put in a message); the delivery log keeps only REFUSED_ADDRESS.
   */
  constructor(
    message: string,
    readonly reason: 'address' | 'url' = 'url',
  ) {
    super(message);
    this.name = 'BlockedTargetError';
  }
}

/**
 * What the delivery log says of a refused address: never what the name resolved to, which would tell
 * whoever reads the log (or set the URL) about the internal network.
 */
export const REFUSED_ADDRESS = 'refused: the target address is not allowed (not public, not in WEBHOOK_PRIVATE_CIDRS)';

const BLOCKED = new net.BlockList();
for (const [net4, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  BLOCKED.addSubnet(net4, prefix, 'ipv4');
}
for (const [net6, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const) {
  BLOCKED.addSubnet(net6, prefix, 'ipv6');
}

/** True when `address` (IPv4 or IPv6) is one a webhook may reach without WEBHOOK_ALLOW_PRIVATE. */
export function isPublicAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 0) return false;
  if (family === 6) {
    return !BLOCKED.check(address, 'ipv6');
  }
  return !BLOCKED.check(address, 'ipv4');
}

function allowListOf(policy: TargetPolicy): net.BlockList | undefined {
  if (!policy.privateCidrs?.length) return undefined;
  const list = new net.BlockList();
  for (const c of policy.privateCidrs) list.addSubnet(c.address, c.prefix, c.family);
  return list;
}

/** True when a webhook may reach `address`: a public one, or one in WEBHOOK_PRIVATE_CIDRS. */
function isAllowedAddress(address: string, allowList: net.BlockList | undefined): boolean {
  if (isPublicAddress(address)) return true;
  const family = net.isIP(address);
  return family !== 0 && allowList !== undefined && allowList.check(address, family === 6 ? 'ipv6' : 'ipv4');
}

/** Checks what can be checked without resolving: scheme, credentials, an address literal. Throws BlockedTargetError. */
export function checkWebhookUrl(raw: string, policy: TargetPolicy): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new BlockedTargetError('not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new BlockedTargetError('only http and https URLs');
  if (url.username || url.password) throw new BlockedTargetError('credentials in the URL are not accepted');
  if (policy.allowPrivate) return url;
  if (url.protocol !== 'https:') throw new BlockedTargetError('only https URLs (WEBHOOK_ALLOW_PRIVATE is off)');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host) && !isAllowedAddress(host, allowListOf(policy))) throw new BlockedTargetError(`${host} is not a public address`, 'address');
  return url;
}

/** A `lookup` for the connection that resolves now and refuses unless every address may be reached. */
const guardedLookup =
  (allowList: net.BlockList | undefined): LookupFunction =>
  (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true, verbatim: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const list = addresses as dns.LookupAddress[];
      const blocked = list.find((a) => !isAllowedAddress(a.address, allowList));
      if (blocked || list.length === 0) {
        return callback(new BlockedTargetError(`${hostname} does not resolve to public addresses only`, 'address'), '', 0);
      }
      // Connect to exactly what was checked (the first address, as dns.lookup orders them).
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, [list[0]!]);
      return callback(null, list[0]!.address, list[0]!.family);
    });
  };

/** The delivery log's text for a refusal: the URL's problem, or the fixed text for an address. */
function refusal(e: Error): string {
  return (e as Partial<BlockedTargetError>).reason === 'address' ? REFUSED_ADDRESS : `refused: ${e.message}`;
}

/** POSTs `body` with `headers` to `rawUrl`; never throws (a failure is a result). */
export async function sendWebhook(rawUrl: string, headers: Record<string, string>, body: string, opts: SendOptions): Promise<SendResult> {
  const started = Date.now();
  const done = (status: number | null, error: string | null): SendResult => ({ status, error, durationMs: Date.now() - started });
  let url: URL;
  try {
    url = checkWebhookUrl(rawUrl, opts);
  } catch (e) {
    return done(null, refusal(e as Error));
  }
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    const finish = (r: SendResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = transport.request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'faceid-webhooks/1' },
        // No connection reuse: every attempt resolves and checks the name again.
        agent: false,
        ...(opts.allowPrivate ? {} : { lookup: guardedLookup(allowListOf(opts)) }),
      },
      (res) => {
        let drained = 0;
        res.on('data', (chunk: Buffer) => {
          drained += chunk.length;
          if (drained > 64 * 1024) res.destroy();
        });
        const status = res.statusCode ?? null;
        res.on('end', () => finish(done(status, null)));
        res.on('close', () => finish(done(status, null)));
        res.on('error', () => finish(done(status, null)));
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new Error(`timeout after ${opts.timeoutMs} ms`));
    }, opts.timeoutMs);
    req.on('error', (e) => {
      const message = e instanceof BlockedTargetError || (e as { name?: string }).name === 'BlockedTargetError' ? refusal(e) : e.message;
      finish(done(null, message.slice(0, 300)));
    });
    req.end(body);
  });
}
