/**
 * Helpers for running services on this machine, shared by `npm start` (scripts/start.ts) and the
 * tests (test/helpers): a free TCP port, and whether a Redis server answers.
 */
import net from 'node:net';
import { Redis } from 'ioredis';

/** `preferred` when it is free, else (or without one) any free port on 127.0.0.1. */
export function freePort(preferred?: number): Promise<number> {
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        const { port: bound } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(bound));
      });
    });
  return preferred === undefined ? listen(0) : listen(preferred).catch(() => listen(0));
}

/** Whether a Redis server answers PING at `url` within `timeoutMs` (one attempt, no retry). */
export async function redisAnswers(url: string, timeoutMs = 1500): Promise<boolean> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}
