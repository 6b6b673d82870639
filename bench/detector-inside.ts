/**
 * Why the detector takes longer inside the service than in the engine's raw loop: the detector's wall
 * and CPU time per capture on the same photo, in the same run,
 *   1. raw: FaceEngine in a process of its own, one capture at a time (as bench/face-path-raw-child.ts);
 *      the first calls after load apart (warm-up);
 *   2. raw beside a second raw loop in another process (two models on two cores at once), and beside two;
 *   3. inside the service: a face process (processes/face.ts, its BullMQ workers, reply lists,
 *      hand-offs) beside the test harness's web process and search worker, one /identify at a time, the
 *      worker's own clock of the step and the process's CPU (GET /clocks).
 *
 *   NODE_ENV=development npx tsx bench/detector-inside.ts
 *
 * CPU time is the process's (process.cpuUsage) around the engine's liveness stage, split by the step's
 * share of its wall time; with FACE_INTRA_OP_THREADS=1 onnxruntime runs on the calling thread.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..');
const PHOTO = path.join(ROOT, 'test/fixtures/faces/lfw/Bush_2.png');
const CALLS = Number(process.env.BENCH_DI_CALLS ?? 40);

interface LoopFigures {
  first: number[];
  detectMs: number;
  detectCpuMs: number;
  livenessMs: number;
  livenessCpuMs: number;
  /** CPU of the liveness and embed stages together, per capture (what a face process runs per identify). */
  captureCpuMs: number;
}

/** The child: one raw loop; prints one JSON line. */
async function rawLoop(calls: number, seconds: number): Promise<LoopFigures> {
  const { FaceEngine } = await import('../features/face/worker/pipeline/engine.js');
  const { normaliseUpload } = await import('../platform/face/image.js');
  const engine = await FaceEngine.load(path.join(ROOT, 'var/models'), { intraOpThreads: Number(process.env.FACE_INTRA_OP_THREADS ?? 1) });
  const n = await normaliseUpload(readFileSync(PHOTO));
  const one = async () => {
    let detect = 0;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const live = await engine.liveness(n.jpeg, 'largest', { align: true, clock: (k, ms) => k === 'detect' && (detect += ms) });
    const wall = performance.now() - t0;
    const c = process.cpuUsage(c0);
    const e0 = process.cpuUsage();
    await engine.embedAligned(live.aligned!);
    const e = process.cpuUsage(e0);
    return { detect, wall, cpu: (c.user + c.system) / 1000, embedCpu: (e.user + e.system) / 1000 };
  };
  const first: number[] = [];
  for (let i = 0; i < 3; i++) first.push(Math.round((await one()).detect * 10) / 10);
  const until = seconds > 0 ? performance.now() + seconds * 1000 : 0;
  let d = 0,
    dc = 0,
    w = 0,
    cpu = 0,
    ec = 0,
    k = 0;
  for (; k < calls || performance.now() < until; k++) {
    const r = await one();
    d += r.detect;
    w += r.wall;
    cpu += r.cpu;
    ec += r.embedCpu;
    dc += (r.cpu * r.detect) / r.wall;
    if (seconds > 0 && performance.now() >= until) break;
  }
  k = Math.max(1, k);
  return { first, detectMs: d / k, detectCpuMs: dc / k, livenessMs: w / k, livenessCpuMs: cpu / k, captureCpuMs: (cpu + ec) / k };
}

function child(args: { calls: number; seconds: number }): Promise<LoopFigures> {
  const c = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), 'child', JSON.stringify(args)], {
    env: process.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  c.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) =>
    c.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!) as LoopFigures) : reject(new Error(`child ${code}`)))),
  );
}

async function inside(calls: number): Promise<{ detectMs: number; jobs: number; cpuPerCaptureMs: number }> {
  const { startHarness } = await import('../test/helpers/harness.js');
  const { identifyWithFixture } = await import('../test/helpers/face-path.js');
  const { newOperator } = await import('../test/helpers/principals.js');
  const { freePort } = await import('../scripts/lib/private-services.js');
  const { startProcess, stopProcess, waitHealthy } = await import('./identify-e2e.js');
  // The face process as production runs it (processes/face.ts), alone in its process: its CPU is its own.
  const h = await startHarness({ face: false, search: 1 });
  const port = await freePort();
  const face = startProcess('processes/face.ts', { ...h.env, FACE_ENGINE_PORT: String(port), LOG_LEVEL: 'silent' });
  try {
    await waitHealthy(`http://127.0.0.1:${port}/health`, 120_000);
    const op = await newOperator(h);
    for (let i = 0; i < 3; i++) await identifyWithFixture(h, op.token, 'test/fixtures/faces/lfw/Bush_2.png');
    type Clocks = { cpuMs: number; liveness: { jobs: number; msByStep: Record<string, number> } };
    const clocks = async () => (await (await fetch(`http://127.0.0.1:${port}/clocks`)).json()) as Clocks;
    const c0 = await clocks();
    for (let i = 0; i < calls; i++) await identifyWithFixture(h, op.token, 'test/fixtures/faces/lfw/Bush_2.png');
    const c1 = await clocks();
    const jobs = c1.liveness.jobs - c0.liveness.jobs;
    return {
      detectMs: ((c1.liveness.msByStep.detect ?? 0) - (c0.liveness.msByStep.detect ?? 0)) / jobs,
      jobs,
      cpuPerCaptureMs: (c1.cpuMs - c0.cpuMs) / jobs,
    };
  } finally {
    await stopProcess(face);
    await h.stop();
  }
}

if (process.argv[2] === 'child') {
  const a = JSON.parse(process.argv[3]!) as { calls: number; seconds: number };
  console.log(JSON.stringify(await rawLoop(a.calls, a.seconds)));
  process.exit(0);
} else {
  const f = (x: number) => x.toFixed(1);
  const alone = await child({ calls: CALLS, seconds: 0 });
  // Beside: the measured loop and one (then two) more raw loops running for as long.
  const [beside1] = await Promise.all([child({ calls: CALLS, seconds: 0 }), child({ calls: 0, seconds: 20 })]);
  const [beside2] = await Promise.all([child({ calls: CALLS, seconds: 0 }), child({ calls: 0, seconds: 25 }), child({ calls: 0, seconds: 25 })]);
  const svc = await inside(CALLS);
  const alone2 = await child({ calls: CALLS, seconds: 0 });
  const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`${new Date().toISOString()}, load average ${load}, ${CALLS} captures of ${path.basename(PHOTO)} per row`);
  console.log(
    '| where | detector wall ms | detector CPU ms | liveness stage wall / CPU ms | CPU per capture (liveness + embed), ms | first 3 calls after load, detector ms |',
  );
  console.log('|---|---|---|---|---|---|');
  const row = (name: string, r: LoopFigures) =>
    console.log(
      `| ${name} | ${f(r.detectMs)} | ${f(r.detectCpuMs)} | ${f(r.livenessMs)} / ${f(r.livenessCpuMs)} | ${f(r.captureCpuMs)} | ${r.first.join(', ')} |`,
    );
  row('raw, alone (before)', alone);
  row('raw, beside 1 other raw loop', beside1);
  row('raw, beside 2 other raw loops', beside2);
  console.log(
    `| inside the service (processes/face.ts alone in its process, one /identify at a time, ${svc.jobs} captures) | ${f(svc.detectMs)} | | | ${f(svc.cpuPerCaptureMs)} (the whole face process) | |`,
  );
  row('raw, alone (after)', alone2);
  process.exit(0);
}
