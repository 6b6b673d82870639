/**
 * Why a model runs slower inside the service than in a raw loop (docs/performance.md "Liveness
 * sessions and a single capture"): the same pipeline (normalise, liveness stage, embed stage; the raw
 * engine of bench/face-path-raw-server.ts) on the same photo, in turn within one run:
 *
 * - one process alone (what the raw loop measures);
 * - two processes at once, one call each (what two face processes do when a session's frames, or a
 *   capture's embed beside its anti-spoof step, run together on 2 cores);
 * - one process with 2 onnxruntime intra-op threads (FACE_INTRA_OP_THREADS=2).
 *
 *   npm run bench -- face-contention          # BENCH_FC_ROUNDS (30)
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { ROOT, fmt, machine, saveResults, summarise, table } from './lib.js';

const ROUNDS = Number(process.env.BENCH_FC_ROUNDS ?? 30);

function rawEngine(photo: Buffer, threads: number) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/face-path-raw-server.ts')], {
    cwd: ROOT,
    env: { ...process.env, BENCH_RAW_THREADS: String(threads) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  let first = true;
  const next = async () => {
    const r = await lines.next();
    if (r.done) throw new Error('face-path-raw-server ended');
    return JSON.parse(r.value) as { ms: number };
  };
  return {
    ready: next(),
    call: async () => {
      child.stdin!.write(`${JSON.stringify(first ? { photoB64: photo.toString('base64') } : {})}\n`);
      first = false;
      return (await next()).ms;
    },
    stop: () => {
      child.stdin!.end();
      child.kill('SIGTERM');
    },
  };
}

export async function runFaceContentionBench(): Promise<string> {
  const photo = readFileSync(path.join(ROOT, 'test/fixtures/faces/liveness/astronaut-center.jpg'));
  const a = rawEngine(photo, 1);
  const b = rawEngine(photo, 1);
  const two = rawEngine(photo, 2);
  try {
    await Promise.all([a.ready, b.ready, two.ready]);
    for (let i = 0; i < 5; i++) for (const e of [a, b, two]) await e.call();
    const alone: number[] = [];
    const together: number[] = [];
    const threads2: number[] = [];
    const sides = [
      async () => alone.push(await a.call()),
      async () => together.push(...(await Promise.all([a.call(), b.call()]))),
      async () => threads2.push(await two.call()),
    ];
    for (let round = 0; round < ROUNDS; round++) for (let k = 0; k < sides.length; k++) await sides[(round + k) % sides.length]!();
    const s = { alone: summarise(alone), together: summarise(together), threads2: summarise(threads2) };
    saveResults('face-contention', s);
    const md = [
      `Machine: ${machine()}; ${ROUNDS} rounds in turn; load average at the end ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}.`,
      '',
      table(
        ['the pipeline on the 512×512 frame (ms per call)', 'p50 / p99', 'p50 ÷ alone'],
        [
          ['one process alone, 1 intra-op thread', `${fmt(s.alone.p50)} / ${fmt(s.alone.p99)}`, '1'],
          ['two processes at once, 1 thread each', `${fmt(s.together.p50)} / ${fmt(s.together.p99)}`, `${fmt(s.together.p50 / s.alone.p50, 2)}×`],
          ['one process, 2 intra-op threads', `${fmt(s.threads2.p50)} / ${fmt(s.threads2.p99)}`, `${fmt(s.threads2.p50 / s.alone.p50, 2)}×`],
        ],
      ),
    ].join('\n');
    console.log(`\n${md}`);
    return md;
  } finally {
    a.stop();
    b.stop();
    two.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runFaceContentionBench();
