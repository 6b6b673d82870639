/** A private redis-server on a free port, for tests that stop and restart Redis for real. */
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort, redisAnswers } from '../../scripts/lib/local-services.js';

export interface PrivateRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    for (let i = 0; i < 100; i++) {
      if (await redisAnswers(url, 500)) return;
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
