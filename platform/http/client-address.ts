/**
 * The client's address, and which client addresses count as one for a per-address cap (OTP requests,
 * operator sign-ins).
 */
import { isIPv6 } from 'node:net';
import type { Context } from 'koa';

/**
 * What the per-IP cap counts: an IPv4 address (also when IPv4-mapped), or an IPv6 address's /64
 * prefix, since one subscriber usually holds a whole /64 and could otherwise rotate addresses freely.
 */
export function ipBucket(ip: string): string {
  const bare = ip.replace(/%.*$/, '');
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(bare);
  if (mapped) return mapped[1]!;
  if (!isIPv6(bare) || bare.includes('.')) return bare;
  const [head = '', tail] = bare.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return `${groups
    .slice(0, 4)
    .map((g) => g.toLowerCase().padStart(4, '0'))
    .join(':')}::/64`;
}

/**
 * The client's address. Behind a trusted proxy (TRUST_PROXY=true) it is the RIGHT-most entry of
 * X-Forwarded-For — the one that proxy appended; entries to its left are whatever the client sent.
 */
export function clientIp(ctx: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const fwd = ctx
      .get('x-forwarded-for')
      .split(',')
      .map((p) => p.trim())
      .filter(Boolean)
      .at(-1);
    if (fwd) return fwd;
  }
  return ctx.socket.remoteAddress ?? 'unknown';
}
