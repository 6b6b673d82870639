/**
 * Threshold calibration of the face engine on the project's own labelled photos (test/fixtures/faces,
 * provenance in test/fixtures/faces/PROVENANCE.md). Read-only unless --write-synthetic is given.
 *
 *   npx tsx scripts/calibrate.ts                    # distributions, liveness, synthetic attacks, thresholds
 *   npx tsx scripts/calibrate.ts --bench            # also: per-stage ms per photo, intra-op 1 vs 2 threads,
 *                                                   #       graph optimisation 'extended' vs 'all' per model
 *   npx tsx scripts/calibrate.ts --write-synthetic  # (re)write test/fixtures/faces/synthetic/*.jpg
 *   npx tsx scripts/calibrate.ts --json out.json    # also write every figure as JSON
 *
 * Models: FACE_MODELS_DIR (absolute or relative to the project root), default var/models.
 * The figures and the reasoning are written up in docs/face-engine.md; the chosen values live in
 * platform/thresholds.ts. This script recomputes them with the rules stated below and says whether
 * platform/thresholds.ts agrees.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import sharp from 'sharp';
import { FaceEngine, type FaceAnalysis } from '../features/face/worker/pipeline/engine.js';
import { config } from '../processes/config.js';
import { cosine } from '../platform/face/embeddings.js';
import { isFaceError } from '../platform/face/face-error.js';
import { normaliseUpload } from '../platform/face/image.js';
import { FIXTURE_PHOTOS, FIXTURES_DIR, type FixturePhoto } from '../test/fixtures/faces/labels.js';
import { CALIBRATED_THRESHOLDS } from '../platform/thresholds.js';
import { FACE_MODELS } from '../platform/face/face-models.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Face extends FaceAnalysis {
  id: string;
  photo: FixturePhoto;
  identity: string;
  /** The face the engine picks in mode 'largest' (faces are analysed largest first). */
  chosen: boolean;
}

type PairKind = 'genuine' | 'same-photo' | 'impostor' | 'unlabelled';

function pairKind(a: Face, b: Face): PairKind {
  if (a.photo.group && b.photo.group && a.photo.file !== b.photo.file) return 'unlabelled';
  if (a.identity !== b.identity) return 'impostor';
  if (a.photo.samePhoto && a.photo.samePhoto === b.photo.samePhoto) return 'same-photo';
  return 'genuine';
}

// ---------------------------------------------------------------------------------------------
// Synthetic presentation attacks (there are no real spoof photos among the fixtures)
// ---------------------------------------------------------------------------------------------

async function rawRgb(buf: Buffer): Promise<{ data: Buffer; width: number; height: number }> {
  const { data, info } = await sharp(buf).rotate().removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

function fromRgb(data: Uint8Array, width: number, height: number) {
  return sharp(Buffer.from(data.buffer, data.byteOffset, data.length), { raw: { width, height, channels: 3 } });
}

/**
 * Deterministic image transforms that imitate a presentation attack made from a live photo. They are
 * imitations: they model one cue each (a print's paper border in a room, a screen's pixel grid and
 * bezel, print halftone dots, a low-resolution recapture), not the optics of a real recapture.
 */
export const SYNTHETIC_ATTACKS: Record<string, { doc: string; make: (photo: Buffer) => Promise<Buffer> }> = {
  'held-print': {
    doc: 'the photo printed at 45% of the frame with a 12 px paper-white border, held in front of a dark room wall',
    make: async (photo) => {
      const { width: W, height: H } = await rawRgb(photo);
      const w = Math.round(W * 0.45),
        h = Math.round(H * 0.45),
        b = 12;
      const print = await sharp(photo)
        .rotate()
        .removeAlpha()
        .resize(w, h, { fit: 'fill' })
        .extend({ top: b, bottom: b, left: b, right: b, background: '#f4f4f0' })
        .toBuffer();
      return sharp({ create: { width: W, height: H, channels: 3, background: '#3a3530' } })
        .composite([{ input: print, left: Math.round((W - w) / 2) - b, top: Math.round((H - h) / 2) - b }])
        .jpeg({ quality: 90 })
        .toBuffer();
    },
  },
  'screen-in-frame': {
    doc: 'the photo on a phone screen (RGB stripe sub-pixels, dimmed, blue cast) with a black bezel, at 50% of the frame, on a grey wall',
    make: async (photo) => {
      const { width: W, height: H } = await rawRgb(photo);
      const screen = await SYNTHETIC_ATTACKS['screen']!.make(photo);
      const w = Math.round(W * 0.5),
        h = Math.round(H * 0.5);
      const framed = await sharp(screen).resize(w, h, { fit: 'fill' }).extend({ top: 20, bottom: 30, left: 10, right: 10, background: '#050505' }).toBuffer();
      return sharp({ create: { width: W, height: H, channels: 3, background: '#8a8070' } })
        .composite([{ input: framed, left: Math.round((W - w) / 2) - 10, top: Math.round((H - h) / 2) - 20 }])
        .jpeg({ quality: 90 })
        .toBuffer();
    },
  },
  screen: {
    doc: 'full-frame screen recapture: each pixel drawn as 3x3 display pixels (R, G, B stripes, dark row gap), rotated 3 degrees, resampled to 1.07x',
    make: async (photo) => {
      const S = 3;
      const src = await rawRgb(photo);
      const W = src.width * S,
        H = src.height * S;
      const up = await rawRgb(await fromRgb(src.data, src.width, src.height).resize(W, H, { kernel: 'nearest' }).png().toBuffer());
      const out = new Uint8Array(W * H * 3);
      for (let y = 0; y < H; y++) {
        for (let x = 0; x < W; x++) {
          for (let c = 0; c < 3; c++) {
            const lit = x % S === c && y % S !== S - 1;
            const v = up.data[(y * W + x) * 3 + c]!;
            out[(y * W + x) * 3 + c] = Math.min(255, (lit ? v * 0.85 + 30 : 12) + (c === 2 ? 10 : 0));
          }
        }
      }
      return fromRgb(out, W, H)
        .rotate(3, { background: '#101010' })
        .resize(Math.round(src.width * 1.07))
        .jpeg({ quality: 85 })
        .toBuffer();
    },
  },
  halftone: {
    doc: 'full-frame print: CMY-like dot screen (pitch 4 px at 15/75/45 degrees), slight blur',
    make: async (photo) => {
      const { data, width: W, height: H } = await rawRgb(photo);
      const out = new Uint8Array(W * H * 3);
      const pitch = 4;
      const angles = [15, 75, 45].map((a) => (a * Math.PI) / 180);
      for (let y = 0; y < H; y++) {
        for (let x = 0; x < W; x++) {
          for (let c = 0; c < 3; c++) {
            const a = angles[c]!;
            const u = (x * Math.cos(a) + y * Math.sin(a)) / pitch;
            const v = (-x * Math.sin(a) + y * Math.cos(a)) / pitch;
            const du = u - Math.round(u),
              dv = v - Math.round(v);
            const r = Math.sqrt(du * du + dv * dv) / Math.SQRT1_2;
            const ink = 1 - data[(y * W + x) * 3 + c]! / 255;
            out[(y * W + x) * 3 + c] = r < Math.sqrt(ink) ? 40 : 240;
          }
        }
      }
      return fromRgb(out, W, H).blur(0.6).jpeg({ quality: 90 }).toBuffer();
    },
  },
  'low-res': {
    doc: 'recapture at a quarter of the resolution (JPEG q40), scaled back up (JPEG q80)',
    make: async (photo) => {
      const { width: W } = await rawRgb(photo);
      const small = await sharp(photo)
        .rotate()
        .removeAlpha()
        .resize(Math.max(8, Math.round(W / 4)))
        .jpeg({ quality: 40 })
        .toBuffer();
      return sharp(small).resize(W).jpeg({ quality: 80 }).toBuffer();
    },
  },
};

/** The synthetic attack fixtures that test/face-pipeline.test.ts uses (written by --write-synthetic). */
export const SYNTHETIC_FIXTURES: Array<{ out: string; from: string; attack: keyof typeof SYNTHETIC_ATTACKS }> = [
  { out: 'synthetic/grace_hopper_a_held_print.jpg', from: 'grace_hopper_a.jpg', attack: 'held-print' },
];

// ---------------------------------------------------------------------------------------------
// Statistics and threshold rules
// ---------------------------------------------------------------------------------------------

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos),
    hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

function summary(values: number[]): { n: number; min: number; p25: number; median: number; p75: number; max: number; mean: number; sd: number } {
  const s = [...values].sort((a, b) => a - b);
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  const sd = Math.sqrt(s.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, s.length - 1));
  return { n: s.length, min: s[0]!, p25: quantile(s, 0.25), median: quantile(s, 0.5), p75: quantile(s, 0.75), max: s.at(-1)!, mean, sd };
}

const r2 = (v: number) => Math.round(v * 100) / 100;
const f3 = (v: number) => v.toFixed(3);
const floor05 = (v: number) => Math.floor(v * 20 + 1e-9) / 20;
const ceil05 = (v: number) => Math.ceil(v * 20 - 1e-9) / 20;
const round05 = (v: number) => Math.round(v * 20) / 20;

export interface ThresholdChoice {
  match: number;
  highConfidence: number;
  liveness: number;
  reasons: string[];
}

/**
 * The rules (docs/face-engine.md):
 * - match: 60% of the way from the highest impostor to the lowest genuine (different-photo) pair,
 *   i.e. leaning toward the impostors' side being far, rounded to 0.05 while staying strictly
 *   inside the gap;
 * - highConfidence: the 75th percentile of the genuine pairs rounded up to 0.05, and at least
 *   match + 0.2, so that refreshing a canonical embedding needs a score far from the impostors;
 * - liveness: 0.5 (live is then the most probable of the three classes), lowered if needed so that
 *   the face chosen in every live fixture photo passes with a margin of 0.1.
 */
export function chooseThresholds(genuine: number[], impostor: number[], chosenLive: number[]): ThresholdChoice {
  const reasons: string[] = [];
  const maxImp = Math.max(...impostor);
  const minGen = Math.min(...genuine);
  if (!(minGen > maxImp)) throw new Error(`genuine and impostor overlap: min genuine ${minGen}, max impostor ${maxImp}`);
  const raw = maxImp + 0.6 * (minGen - maxImp);
  let match = round05(raw);
  if (!(match > maxImp && match < minGen)) match = r2(raw);
  reasons.push(
    `match ${match}: gap (${f3(maxImp)}, ${f3(minGen)}) between highest impostor and lowest genuine; 60% point ${f3(raw)}; margins ${f3(match - maxImp)} above the impostor, ${f3(minGen - match)} below the genuine`,
  );
  const genSorted = [...genuine].sort((a, b) => a - b);
  const p75 = quantile(genSorted, 0.75);
  const highConfidence = Math.max(ceil05(p75), r2(match + 0.2));
  reasons.push(
    `highConfidence ${highConfidence}: 75th percentile of genuine ${f3(p75)} rounded up to 0.05, and >= match + 0.2; genuine pairs at or above it: ${genuine.filter((g) => g >= highConfidence).length}/${genuine.length}`,
  );
  const minLive = Math.min(...chosenLive);
  const liveness = Math.min(0.5, floor05(minLive - 0.1));
  reasons.push(`liveness ${liveness}: 0.5 unless the lowest chosen live fixture face (${f3(minLive)}) needs it lower to pass with a 0.1 margin`);
  return { match, highConfidence, liveness, reasons };
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

function modelsDir(): string {
  return path.resolve(ROOT, config().face.modelsDir);
}

async function loadPhoto(file: string): Promise<Buffer> {
  return (await normaliseUpload(readFileSync(path.join(FIXTURES_DIR, file)))).jpeg;
}

function median(xs: number[]): number {
  return quantile(
    [...xs].sort((a, b) => a - b),
    0.5,
  );
}

/** Per-stage timings of one engine (one intra-op thread count) in this process. */
async function benchEngine(threads: number): Promise<Record<string, unknown>> {
  const engine = await FaceEngine.load(modelsDir(), { intraOpThreads: threads });
  const rows: Array<{ photo: string; size: string; liveness: number; embed: number }> = [];
  const photos = FIXTURE_PHOTOS.filter((x) => x.identity || x.group);
  const jpegs = await Promise.all(photos.map((p) => loadPhoto(p.file)));
  for (let k = 0; k < photos.length; k++) {
    const jpeg = jpegs[k]!;
    const meta = await sharp(jpeg).metadata();
    const live: number[] = [],
      embed: number[] = [];
    for (let i = 0; i < 11; i++) {
      const l = await engine.liveness(jpeg, 'largest');
      const m = await engine.embed(jpeg, l.face.landmarks5);
      if (i >= 2) {
        live.push(l.ms);
        embed.push(m.ms);
      }
    }
    rows.push({ photo: photos[k]!.file, size: `${meta.width}x${meta.height}`, liveness: median(live), embed: median(embed) });
  }
  // Throughput with two requests in flight (a worker with concurrency 2, or two jobs on one machine).
  let best = 0;
  for (let round = 0; round < 2; round++) {
    const queue = [...jpegs, ...jpegs, ...jpegs];
    const t0 = performance.now();
    const worker = async () => {
      for (let j = queue.shift(); j; j = queue.shift()) {
        const l = await engine.liveness(j, 'largest');
        await engine.embed(j, l.face.landmarks5);
      }
    };
    await Promise.all([worker(), worker()]);
    best = Math.max(best, (jpegs.length * 3) / ((performance.now() - t0) / 1000));
  }
  await engine.release();
  return { threads, rows, photosPerSecondTwoInFlight: Math.round(best * 10) / 10 };
}

async function bench(out: Record<string, unknown>): Promise<void> {
  console.log('\n== Timing: wall clock per stage, median of 9 runs after 2 warm-up runs; one process per thread count ==');
  // One child process per setting: idle onnxruntime threads of one engine (they spin) would slow the other.
  const results = [1, 2].map((threads) => {
    const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--bench-engine', String(threads)], {
      encoding: 'utf8',
      env: process.env,
    });
    if (r.status !== 0) throw new Error(`bench child failed: ${r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as {
      threads: number;
      rows: Array<{ photo: string; size: string; liveness: number; embed: number }>;
      photosPerSecondTwoInFlight: number;
    };
  });
  const [one, two] = results as [(typeof results)[0], (typeof results)[0]];
  console.log(
    `${'photo'.padEnd(22)} ${'size'.padEnd(10)} ${'liveness 1t'.padStart(12)} ${'liveness 2t'.padStart(12)} ${'embed 1t'.padStart(10)} ${'embed 2t'.padStart(10)}`,
  );
  one.rows.forEach((r, i) => {
    const q = two.rows[i]!;
    console.log(
      `${r.photo.padEnd(22)} ${r.size.padEnd(10)} ${r.liveness.toFixed(1).padStart(12)} ${q.liveness.toFixed(1).padStart(12)} ${r.embed.toFixed(1).padStart(10)} ${q.embed.toFixed(1).padStart(10)}`,
    );
  });
  const med = (rs: typeof one.rows, k: 'liveness' | 'embed') => median(rs.map((r) => r[k])).toFixed(1);
  console.log(
    `${'median over photos'.padEnd(33)} ${med(one.rows, 'liveness').padStart(12)} ${med(two.rows, 'liveness').padStart(12)} ${med(one.rows, 'embed').padStart(10)} ${med(two.rows, 'embed').padStart(10)}`,
  );
  console.log(
    `photos per second (liveness + embed) with 2 requests in flight: intra-op 1 thread ${one.photosPerSecondTwoInFlight}, 2 threads ${two.photosPerSecondTwoInFlight}`,
  );
  const modelRows: Array<Record<string, unknown>> = [];
  console.log('\n== Model run time alone (ms per run, median of 30, fixed pseudo-random input) ==');
  for (const m of FACE_MODELS) {
    const shape: number[] = [...m.inputShape];
    const input = new ort.Tensor(
      'float32',
      Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => Math.sin(i) * 0.5),
      shape,
    );
    const row: Record<string, unknown> = { model: m.file };
    for (const [level, threads] of [
      ['extended', 1],
      ['extended', 2],
      ['all', 1],
    ] as const) {
      const s = await ort.InferenceSession.create(path.join(modelsDir(), m.file), {
        graphOptimizationLevel: level,
        intraOpNumThreads: threads,
        interOpNumThreads: 1,
        executionMode: 'sequential',
      });
      for (let i = 0; i < 5; i++) await s.run({ [m.inputName]: input });
      const t: number[] = [];
      for (let i = 0; i < 30; i++) {
        const t0 = performance.now();
        await s.run({ [m.inputName]: input });
        t.push(performance.now() - t0);
      }
      row[`${level}/${threads}t`] = Math.round(median(t) * 100) / 100;
      await s.release();
    }
    modelRows.push(row);
    console.log(
      `${m.file.padEnd(18)} ${Object.entries(row)
        .slice(1)
        .map(([k, v]) => `${k} ${String(v).padStart(6)}`)
        .join('   ')}`,
    );
  }
  out.timing = { engines: results, perModel: modelRows };
}

async function main(): Promise<void> {
  const args = new Set(process.argv.slice(2));
  const jsonIdx = process.argv.indexOf('--json');
  const jsonOut = jsonIdx > 0 ? process.argv[jsonIdx + 1] : undefined;
  const out: Record<string, unknown> = {};

  const benchIdx = process.argv.indexOf('--bench-engine');
  if (benchIdx > 0) {
    console.log(JSON.stringify(await benchEngine(Number(process.argv[benchIdx + 1]))));
    return;
  }

  if (args.has('--write-synthetic')) {
    for (const s of SYNTHETIC_FIXTURES) {
      const buf = await SYNTHETIC_ATTACKS[s.attack]!.make(readFileSync(path.join(FIXTURES_DIR, s.from)));
      mkdirSync(path.dirname(path.join(FIXTURES_DIR, s.out)), { recursive: true });
      writeFileSync(path.join(FIXTURES_DIR, s.out), buf);
      console.log(`wrote ${s.out} (${s.attack} of ${s.from})`);
    }
  }

  const engine = await FaceEngine.load(modelsDir());
  console.log(`engine ${engine.version.engine}, models in ${modelsDir()}`);

  // --- every face of every photo ---
  const faces: Face[] = [];
  console.log('\n== Faces (largest first; "chosen" = the face mode \'largest\' picks) ==');
  for (const p of FIXTURE_PHOTOS) {
    const jpeg = await loadPhoto(p.file);
    const a = await engine.analyse(jpeg);
    if (a.faces.length === 0) {
      console.log(`${p.file.padEnd(22)} ${a.width}x${a.height}  no face${p.identity || p.group ? '   <-- MISSED FACE' : ''}`);
      continue;
    }
    a.faces.forEach((f, k) => {
      const identity = p.group ? `${p.file}#${k}` : k === 0 ? p.identity! : `${p.file}#${k}?`;
      faces.push({ ...f, id: `${p.file}#${k}`, photo: p, identity, chosen: k === 0 });
      console.log(
        `${(k === 0 ? p.file : '').padEnd(22)} ${k === 0 ? `${a.width}x${a.height}`.padEnd(9) : ''.padEnd(9)} #${k} box ${f.box
          .map((v) => Math.round(v))
          .join(',')
          .padEnd(16)} det ${f.detScore.toFixed(3)}  live ${f.livenessScore.toFixed(4)}${k === 0 ? '  chosen' : ''}`,
      );
    });
    // the request path gives the same numbers as the analysis
    if (!p.group) {
      const l = await engine.liveness(jpeg, 'single');
      const e = await engine.embed(jpeg, l.face.landmarks5);
      const c = cosine(e.embedding, a.faces[0]!.embedding);
      if (l.livenessScore !== a.faces[0]!.livenessScore || c < 0.99999) throw new Error(`analyse and liveness/embed disagree on ${p.file}`);
    } else {
      try {
        await engine.liveness(jpeg, 'single');
        console.log(`   ${p.file}: mode 'single' accepted it  <-- EXPECTED multiple_faces`);
      } catch (err) {
        if (!isFaceError(err) || err.code !== 'multiple_faces') throw err;
        console.log(`   ${p.file}: mode 'single' -> multiple_faces (as expected)`);
      }
    }
  }

  // --- pairs ---
  const pairs: Array<{ a: string; b: string; kind: PairKind; cosine: number }> = [];
  for (let i = 0; i < faces.length; i++) {
    for (let j = i + 1; j < faces.length; j++) {
      pairs.push({ a: faces[i]!.id, b: faces[j]!.id, kind: pairKind(faces[i]!, faces[j]!), cosine: cosine(faces[i]!.embedding, faces[j]!.embedding) });
    }
  }
  const of = (k: PairKind) => pairs.filter((p) => p.kind === k).sort((x, y) => y.cosine - x.cosine);
  const genuine = of('genuine'),
    samePhoto = of('same-photo'),
    impostor = of('impostor'),
    unlabelled = of('unlabelled');
  const show = (s: ReturnType<typeof summary>) =>
    `n=${s.n} min ${f3(s.min)} p25 ${f3(s.p25)} median ${f3(s.median)} p75 ${f3(s.p75)} max ${f3(s.max)} mean ${f3(s.mean)} sd ${f3(s.sd)}`;
  console.log('\n== Cosine similarity ==');
  console.log(`genuine (different photos of one person): ${show(summary(genuine.map((p) => p.cosine)))}`);
  for (const p of genuine) console.log(`   ${f3(p.cosine)}  ${p.a} ~ ${p.b}`);
  console.log(`same photograph, two crops (not independent evidence): ${samePhoto.map((p) => `${f3(p.cosine)} ${p.a} ~ ${p.b}`).join('; ')}`);
  console.log(`impostor (different people): ${show(summary(impostor.map((p) => p.cosine)))}`);
  for (const p of impostor.slice(0, 6)) console.log(`   ${f3(p.cosine)}  ${p.a} ~ ${p.b}`);
  console.log(
    `unlabelled (faces of different group photos: the same model may appear in several; excluded): ${unlabelled.length > 0 ? show(summary(unlabelled.map((p) => p.cosine))) : 'none'}`,
  );
  for (const p of unlabelled.slice(0, 3)) console.log(`   ${f3(p.cosine)}  ${p.a} ~ ${p.b}`);
  const histogram = (vals: number[]) => {
    const bins = new Map<number, number>();
    for (const v of vals) bins.set(Math.floor(v * 10), (bins.get(Math.floor(v * 10)) ?? 0) + 1);
    return [...bins.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([b, n]) => `[${(b / 10).toFixed(1)},${((b + 1) / 10).toFixed(1)}): ${n}`)
      .join('  ');
  };
  console.log(`impostor histogram: ${histogram(impostor.map((p) => p.cosine))}`);
  console.log(`genuine histogram:  ${histogram(genuine.map((p) => p.cosine))}`);

  // --- liveness ---
  const chosenLive = faces.filter((f) => f.chosen).map((f) => f.livenessScore);
  const allLive = faces.map((f) => f.livenessScore);
  console.log('\n== Liveness (probability of class 0 = live) of every fixture face (all are live captures) ==');
  console.log(`chosen faces: ${show(summary(chosenLive))}`);
  console.log(`all faces:    ${show(summary(allLive))}`);
  for (const f of [...faces].sort((a, b) => a.livenessScore - b.livenessScore).slice(0, 5)) {
    console.log(`   lowest: ${f.livenessScore.toFixed(4)}  ${f.id}${f.chosen ? ' (chosen)' : ' (not the chosen face of its photo)'}`);
  }

  // --- synthetic attacks ---
  console.log("\n== Synthetic presentation attacks: liveness of the chosen face (mode 'largest') ==");
  const attackNames = Object.keys(SYNTHETIC_ATTACKS);
  for (const n of attackNames) console.log(`   ${n}: ${SYNTHETIC_ATTACKS[n]!.doc}`);
  console.log(`${'photo'.padEnd(22)}${'live'.padStart(9)}${attackNames.map((n) => n.padStart(17)).join('')}`);
  const attackRows: Array<Record<string, unknown>> = [];
  const attackScores: Record<string, number[]> = Object.fromEntries(attackNames.map((n) => [n, []]));
  const attackMisses: Record<string, number> = Object.fromEntries(attackNames.map((n) => [n, 0]));
  for (const p of FIXTURE_PHOTOS.filter((x) => x.identity || x.group)) {
    const original = readFileSync(path.join(FIXTURES_DIR, p.file));
    const liveFace = faces.find((f) => f.photo === p && f.chosen)!;
    const row: Record<string, unknown> = { photo: p.file, live: liveFace.livenessScore };
    for (const n of attackNames) {
      try {
        const jpeg = (await normaliseUpload(await SYNTHETIC_ATTACKS[n]!.make(original))).jpeg;
        const r = await engine.liveness(jpeg, 'largest');
        row[n] = r.livenessScore;
        attackScores[n]!.push(r.livenessScore);
      } catch (err) {
        if (!isFaceError(err)) throw err;
        row[n] = err.code;
        attackMisses[n]!++;
      }
    }
    attackRows.push(row);
    const cell = (v: unknown) => (typeof v === 'number' ? v.toFixed(4) : String(v)).padStart(17);
    console.log(`${p.file.padEnd(22)}${liveFace.livenessScore.toFixed(4).padStart(9)}${attackNames.map((n) => cell(row[n])).join('')}`);
  }

  // --- derived close-ups: how tight crops behave (selfies are close-ups) ---
  console.log('\n== Close-ups derived from the portraits: crop around the detector box (margin as a share of the box), scaled to 600 px on the long side ==');
  const closeUps: Array<Record<string, unknown>> = [];
  for (const file of ['grace_hopper_a.jpg', 'astronaut.png']) {
    const base = faces.find((f) => f.photo.file === file && f.chosen)!;
    const [bx, by, bw, bh] = base.box;
    const meta = await sharp(path.join(FIXTURES_DIR, file)).metadata();
    const cells: string[] = [];
    for (const margin of [-0.15, 0, 0.1, 0.3, 0.6]) {
      const l = Math.max(0, Math.round(bx - bw * margin)),
        t = Math.max(0, Math.round(by - bh * margin));
      const r = Math.min(meta.width!, Math.round(bx + bw * (1 + margin))),
        b = Math.min(meta.height!, Math.round(by + bh * (1 + margin)));
      const crop = await sharp(path.join(FIXTURES_DIR, file))
        .extract({ left: l, top: t, width: r - l, height: b - t })
        .resize({ width: 600, height: 600, fit: 'inside' })
        .jpeg({ quality: 92 })
        .toBuffer();
      try {
        const jpeg = (await normaliseUpload(crop)).jpeg;
        const lr = await engine.liveness(jpeg, 'single');
        const er = await engine.embed(jpeg, lr.face.landmarks5);
        const c = cosine(er.embedding, base.embedding);
        closeUps.push({ file, margin, cosine: c, liveness: lr.livenessScore });
        cells.push(`${margin >= 0 ? '+' : ''}${margin}: cos ${f3(c)} live ${lr.livenessScore.toFixed(3)}`);
      } catch (err) {
        if (!isFaceError(err)) throw err;
        closeUps.push({ file, margin, error: err.code });
        cells.push(`${margin}: ${err.code}`);
      }
    }
    console.log(`${file.padEnd(20)} ${cells.join(' | ')}`);
  }
  out.closeUps = closeUps;

  // --- thresholds ---
  const choice = chooseThresholds(
    genuine.map((p) => p.cosine),
    impostor.map((p) => p.cosine),
    chosenLive,
  );
  console.log('\n== Thresholds ==');
  for (const r of choice.reasons) console.log(`   ${r}`);
  const failLive = faces.filter((f) => f.livenessScore < choice.liveness);
  console.log(
    `   live fixture faces below the liveness threshold: chosen ${failLive.filter((f) => f.chosen).length}/${chosenLive.length}, all ${failLive.length}/${allLive.length}${failLive.length ? ` (${failLive.map((f) => `${f.id} ${f.livenessScore}`).join(', ')})` : ''}`,
  );
  for (const n of attackNames) {
    const s = attackScores[n]!;
    console.log(
      `   synthetic ${n}: ${s.filter((v) => v < choice.liveness).length}/${s.length} rejected by liveness${attackMisses[n] ? `, ${attackMisses[n]} more gave no face` : ''}`,
    );
  }
  const same =
    choice.match === CALIBRATED_THRESHOLDS.match &&
    choice.highConfidence === CALIBRATED_THRESHOLDS.highConfidence &&
    choice.liveness === CALIBRATED_THRESHOLDS.liveness;
  console.log(`\nMATCH_THRESHOLD=${choice.match} HIGH_CONFIDENCE_THRESHOLD=${choice.highConfidence} LIVENESS_THRESHOLD=${choice.liveness}`);
  console.log(
    `platform/thresholds.ts: ${JSON.stringify(CALIBRATED_THRESHOLDS)} ${same ? '(agrees)' : '<-- DIFFERS: update platform/thresholds.ts and docs/face-engine.md'}`,
  );

  Object.assign(out, {
    engine: engine.version,
    faces: faces.map(({ embedding: _e, photo: _p, ...f }) => f),
    pairs,
    summaries: {
      genuine: summary(genuine.map((p) => p.cosine)),
      impostor: summary(impostor.map((p) => p.cosine)),
      samePhoto: samePhoto.map((p) => p.cosine),
      unlabelled: unlabelled.length ? summary(unlabelled.map((p) => p.cosine)) : null,
      livenessChosen: summary(chosenLive),
      livenessAll: summary(allLive),
    },
    syntheticAttacks: attackRows,
    thresholds: choice,
  });
  await engine.release();

  if (args.has('--bench')) await bench(out);
  if (jsonOut) {
    writeFileSync(jsonOut, JSON.stringify(out, null, 2));
    console.log(`\nwrote ${jsonOut}`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
