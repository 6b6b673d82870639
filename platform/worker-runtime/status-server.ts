/** The tiny HTTP server of a worker process: a few GET routes answering JSON (health, version), or text (metrics). */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** `body` is sent as JSON; `text` (Prometheus exposition) as plain text instead. */
type StatusAnswer = { status?: number; body: unknown; text?: string };
export type StatusRoute = () => StatusAnswer | Promise<StatusAnswer>;

export interface StatusServer {
  server: Server;
  url: string;
  close(): Promise<void>;
}

export async function startStatusServer(port: number, host: string, routes: Record<string, StatusRoute>): Promise<StatusServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const route = req.method === 'GET' ? routes[path] : undefined;
    const send = (status: number, body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    };
    if (!route) {
      send(404, { error: 'not_found', message: `no route ${req.method} ${path}` });
      return;
    }
    Promise.resolve()
      .then(route)
      .then((r) => {
        if (r.text === undefined) return send(r.status ?? 200, r.body);
        res.writeHead(r.status ?? 200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(r.text) });
        res.end(r.text);
      })
      .catch((e: unknown) => send(500, { status: 'error', detail: e instanceof Error ? e.message : String(e) }));
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port: actual } = server.address() as AddressInfo;
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return {
    server,
    url: `http://${shown}:${actual}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
