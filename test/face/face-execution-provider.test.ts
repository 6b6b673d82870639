/**
 * FACE_EXECUTION_PROVIDER: `cuda` on a machine without a GPU or onnxruntime's CUDA provider (these test
 * machines have neither) falls back to the CPU: the face process starts, says so in one log line, and
 * tells which provider runs on /version, /health and /metrics.
 */
import test from 'ava';
import { loadConfig } from '../../processes/config.js';
import { createLogger } from '../../platform/logger.js';
import { startFaceWorker } from '../../features/face/worker/worker.js';
import { TEST_REDIS_URL, testRedisPrefix } from '../helpers/db.js';

async function startWith(provider: string | undefined) {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ level: 'info', destination: { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) } });
  const config = loadConfig({
    NODE_ENV: 'test',
    REDIS_URL: TEST_REDIS_URL,
    REDIS_PREFIX: testRedisPrefix(),
    FACE_ENGINE_PORT: '0',
    ...(provider ? { FACE_EXECUTION_PROVIDER: provider } : {}),
  });
  const worker = await startFaceWorker(config, { logger });
  const get = (p: string) => fetch(`${worker.url}${p}`);
  return { worker, lines, get };
}

test('cuda without a GPU: the face process runs on the CPU, logs why, and reports the provider', async (t) => {
  const { worker, lines, get } = await startWith('cuda');
  try {
    const fallback = lines.filter((l) => l.requested === 'cuda' && l.provider === 'cpu');
    t.is(fallback.length, 1, 'one log line for the fallback');
    t.is(fallback[0]!.level, 40, 'a warning');
    t.truthy(fallback[0]!.reason);
    t.is(((await (await get('/version')).json()) as { executionProvider: string }).executionProvider, 'cpu');
    t.is(((await (await get('/health')).json()) as { executionProvider: string }).executionProvider, 'cpu');
    const metrics = await get('/metrics');
    t.regex(metrics.headers.get('content-type') ?? '', /^text\/plain/);
    t.regex(await metrics.text(), /^faceid_face_execution_provider\{provider="cpu",requested="cuda"\} 1$/m);
  } finally {
    await worker.close();
  }
});

test('the default is the CPU, without a fallback line', async (t) => {
  const { worker, lines, get } = await startWith(undefined);
  try {
    t.is(lines.filter((l) => l.requested === 'cuda').length, 0);
    t.regex(await (await get('/metrics')).text(), /^faceid_face_execution_provider\{provider="cpu",requested="cpu"\} 1$/m);
  } finally {
    await worker.close();
  }
});

test('an unknown provider is refused by the configuration', (t) => {
  t.throws(() => loadConfig({ FACE_EXECUTION_PROVIDER: 'rocm' }), { message: /FACE_EXECUTION_PROVIDER="rocm": expected one of cpu, cuda/ });
});
