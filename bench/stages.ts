/**
 * Per-stage latency of the face pipeline on the fixture photos, and its throughput per core, with the
 * real models (the same FaceEngine the face worker loads).
 *
 *   npm run bench -- stages
 *   BENCH_STAGE_ROUNDS=20 BENCH_THROUGHPUT_SECONDS=30 FACE_INTRA_OP_THREADS=1 npm run bench -- stages
 *
 * Stages: `normalise` (the API's upload normalisation), `liveness` (decode, detect, choose, landmarks,
 * anti-spoof), `embed` (decode, align, embed). Throughput: the whole pipeline (normalise + liveness +
 * embed) run back to back for a fixed time, one image in flight and then two; "per core" divides by
 * the CPU time the process used (ONNX, libvips and JS threads together), so it does not depend on
 * how many cores the machine has.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { normaliseUpload } from '../platform/face/image.js';
import { isFaceError } from '../platform/face/face-error.js';
import { ROOT, closedLoop, fmt, machine, saveResults, summarise, table } from './lib.js';

const FIXTURES = path.join(ROOT, 'test/fixtures/faces');

export function fixturePhotos(): { file: string; kind: string; data: Buffer }[] {
  const list: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(path.join(FIXTURES, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'synthetic') walk(rel);
      } else if (/\.(jpe?g|png|webp)$/i.test(e.name)) list.push(rel);
    }
  };
  walk('');
  return list.sort().map((file) => ({
    file,
    kind: file.startsWith('lfw/')
      ? 'close-up (LFW tile ~126x172)'
      : file.startsWith('group/')
        ? 'group photo (1280 px after normalising)'
        : file.includes('no_face')
          ? 'no face'
          : 'portrait (~512 px)',
    data: readFileSync(path.join(FIXTURES, file)),
  }));
}

interface PipelineOut {
  normalise: number;
  liveness: number;
  embed: number | null;
}

async function pipeline(engine: FaceEngine, data: Buffer): Promise<PipelineOut> {
  let t = performance.now();
  const n = await normaliseUpload(data);
  const normalise = performance.now() - t;
  t = performance.now();
  let live;
  try {
    live = await engine.liveness(n.jpeg, 'largest');
  } catch (e) {
    if (!isFaceError(e)) throw e;
    return { normalise, liveness: performance.now() - t, embed: null };
  }
  const liveness = performance.now() - t;
  t = performance.now();
  await engine.embed(n.jpeg, live.face.landmarks5);
  return { normalise, liveness, embed: performance.now() - t };
}

async function throughput(engine: FaceEngine, photos: Buffer[], inFlight: number, seconds: number) {
  const run = await closedLoop(inFlight, seconds, photos, (p) => pipeline(engine, p));
  return {
    inFlight,
    images: run.done,
    wallSeconds: run.wallSeconds,
    perSecond: run.perSecond,
    cpuMsPerImage: run.cpuMsPerCall,
    perCoreSecond: 1000 / run.cpuMsPerCall,
  };
}

/**
 * What the capture-quality assessment adds to the liveness stage: each photo's liveness stage with
 * and without it, back to back in alternating order, so that machine noise hits both alike.
 */
async function qualityOverhead(engine: FaceEngine, photos: Buffer[], rounds: number) {
  const jpegs = await Promise.all(photos.map(async (p) => (await normaliseUpload(p)).jpeg));
  const withQ: number[] = [],
    withoutQ: number[] = [],
    added: number[] = [],
    own: number[] = [];
  const time = async (jpeg: Buffer, quality: boolean) => {
    const t = performance.now();
    const r = await engine.liveness(jpeg, 'largest', { quality });
    if (r.qualityMs !== undefined) own.push(r.qualityMs);
    return performance.now() - t;
  };
  for (let r = 0; r < rounds; r++) {
    for (const jpeg of jpegs) {
      const first = r % 2 === 0;
      const a = await time(jpeg, first);
      const b = await time(jpeg, !first);
      const [w, wo] = first ? [a, b] : [b, a];
      withQ.push(w);
      withoutQ.push(wo);
      added.push(w - wo);
    }
  }
  return { samples: added.length, with: summarise(withQ), without: summarise(withoutQ), added: summarise(added), own: summarise(own) };
}

export async function runStagesBench(): Promise<string> {
  const rounds = Number(process.env.BENCH_STAGE_ROUNDS ?? 10);
  const seconds = Number(process.env.BENCH_THROUGHPUT_SECONDS ?? 15);
  const threads = Number(process.env.FACE_INTRA_OP_THREADS ?? 1);
  const modelsDir = path.resolve(ROOT, process.env.FACE_MODELS_DIR ?? 'var/models');
  console.log(`stages bench on ${machine()}: ${rounds} rounds over the fixture photos, intra-op threads ${threads}`);
  const t0 = performance.now();
  const engine = await FaceEngine.load(modelsDir, { intraOpThreads: threads });
  const loadMs = performance.now() - t0;
  const photos = fixturePhotos();

  for (const p of photos) await pipeline(engine, p.data); // warm every shape once
  const byKind = new Map<string, { normalise: number[]; liveness: number[]; embed: number[] }>();
  const all = { normalise: [] as number[], liveness: [] as number[], embed: [] as number[], total: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    for (const p of photos) {
      const o = await pipeline(engine, p.data);
      const k = byKind.get(p.kind) ?? { normalise: [], liveness: [], embed: [] };
      byKind.set(p.kind, k);
      k.normalise.push(o.normalise);
      k.liveness.push(o.liveness);
      all.normalise.push(o.normalise);
      all.liveness.push(o.liveness);
      if (o.embed !== null) {
        k.embed.push(o.embed);
        all.embed.push(o.embed);
        all.total.push(o.normalise + o.liveness + o.embed);
      }
    }
  }
  const withFace = photos.filter((p) => !p.kind.startsWith('no face')).map((p) => p.data);
  const quality = await qualityOverhead(engine, withFace, rounds);
  const tp1 = await throughput(engine, withFace, 1, seconds);
  const tp2 = await throughput(engine, withFace, 2, seconds);
  await engine.release();

  const st = (xs: number[]) => {
    const s = summarise(xs);
    return `${fmt(s.p50)} / ${fmt(s.p99)}`;
  };
  const stageRows = [
    ['all photos', st(all.normalise), st(all.liveness), st(all.embed), st(all.total), String(all.liveness.length)],
    ...[...byKind].map(([kind, k]) => [kind, st(k.normalise), st(k.liveness), k.embed.length ? st(k.embed) : '–', '', String(k.liveness.length)]),
  ];
  const md = [
    `Engine load (4 models, SHA-256 checked, warm-up): ${fmt(loadMs, 0)} ms. Intra-op threads: ${threads}. ${photos.length} photos × ${rounds} rounds.`,
    '',
    table(['photos', 'normalise ms p50 / p99', 'liveness ms p50 / p99', 'embed ms p50 / p99', 'pipeline ms p50 / p99', 'samples'], stageRows),
    '',
    `Capture quality inside the liveness stage (same photo with and without it, alternated, ${quality.samples} pairs): ` +
      `the assessment itself takes p50 ${fmt(quality.own.p50)} ms, p99 ${fmt(quality.own.p99)} ms (budget: 3 ms p50); liveness p50 ${fmt(quality.with.p50)} ms with it, ${fmt(quality.without.p50)} ms without ` +
      `(paired difference p50 ${fmt(quality.added.p50)} ms: noisier, both runs include the models).`,
    '',
    table(
      ['images in flight', 'images/s (wall)', 'CPU ms per image', 'images per core-second'],
      [tp1, tp2].map((t) => [String(t.inFlight), fmt(t.perSecond, 1), fmt(t.cpuMsPerImage, 1), fmt(t.perCoreSecond, 1)]),
    ),
  ].join('\n');
  saveResults('stages', {
    threads,
    rounds,
    loadMs,
    stages: { normalise: summarise(all.normalise), liveness: summarise(all.liveness), embed: summarise(all.embed), total: summarise(all.total) },
    byKind: Object.fromEntries(
      [...byKind].map(([k, v]) => [k, { normalise: summarise(v.normalise), liveness: summarise(v.liveness), embed: summarise(v.embed) }]),
    ),
    throughput: [tp1, tp2],
    quality,
  });
  console.log(`\n${md}`);
  return md;
}

if (import.meta.url === `file://${process.argv[1]}`) await runStagesBench();
