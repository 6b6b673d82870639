/**
 * One HTTP(S) call to a part of the layout (etcd's JSON gateway, Patroni's REST API), verifying an
 * `https://` server against the layout's own CA. Node's `fetch` takes no CA of its own (only
 * NODE_EXTRA_CA_CERTS, read once at start, before the layout made its CA), hence node:https.
 * The server's name is checked as Node does by default: the certificates list each host's address.
 */
import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';

export interface RestAnswer {
  status: number;
  text: string;
}

export interface RestCall {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  timeoutMs?: number;
  /** The CA to verify an `https://` server against. */
  caFile?: string;
}

const cas = new Map<string, Buffer>();
const caOf = (file: string) => cas.get(file) ?? cas.set(file, readFileSync(file)).get(file)!;

/** Answers the status and body; rejects on a network error, a TLS failure or the timeout. */
export function restCall(url: string, o: RestCall = {}): Promise<RestAnswer> {
  const u = new URL(url);
  const secure = u.protocol === 'https:';
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request(
      u,
      {
        method: o.method ?? 'GET',
        headers: { ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}), ...o.headers },
        timeout: o.timeoutMs ?? 5000,
        agent: false,
        ...(secure && o.caFile ? { ca: caOf(o.caFile) } : {}),
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${url}: no answer within ${o.timeoutMs ?? 5000} ms`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

/** The status, or 0 when the part does not answer (down, cut off, or refusing TLS). */
export const restStatus = (url: string, o: RestCall = {}): Promise<number> =>
  restCall(url, o).then(
    (r) => r.status,
    () => 0,
  );
