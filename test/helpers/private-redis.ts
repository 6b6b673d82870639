/** A private redis-server on a free port, for tests that stop and restart Redis for real. */
import { spawn, type ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { freePort } from './harness.js';

export interface PrivateRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}

async function answers(url: string): Promise<boolean> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: () => null });
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

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    for (let i = 0; i < 100; i++) {
      if (await answers(url)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('private redis-server did not start');
  };
  const stop = async () => {
    if (!child || child.exitCode !== null) return;
    const c = child;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  };
  await start();
  return { url, port, start, stop };
}
