/**
 * A real webhook receiver on loopback, as a bank's system would run one: it records every request
 * (path, headers, raw body) and answers each path with the statuses a test scripts for it (the last
 * one repeats; 200 by default).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  path: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedWebhook[];
  /** Requests on one path, in arrival order. */
  on(path: string): ReceivedWebhook[];
  /** The statuses `path` answers, in order; the last repeats. */
  script(path: string, statuses: number[]): void;
  /** Waits until `path` has received at least `count` requests (or throws after `timeoutMs`). */
  waitFor(path: string, count: number, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const scripts = new Map<string, number[]>();
  const served = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v;
      received.push({ path, headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const n = served.get(path) ?? 0;
      served.set(path, n + 1);
      const statuses = scripts.get(path) ?? [200];
      res.statusCode = statuses[Math.min(n, statuses.length - 1)]!;
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const on = (path: string) => received.filter((r) => r.path === path);
  return {
    url,
    received,
    on,
    script: (path, statuses) => scripts.set(path, statuses),
    waitFor: async (path, count, timeoutMs = 15_000) => {
      const until = Date.now() + timeoutMs;
      while (on(path).length < count) {
        if (Date.now() > until) throw new Error(`${path}: ${on(path).length} of ${count} webhooks after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
      return on(path);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
