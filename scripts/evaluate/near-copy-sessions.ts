/**
 * How many sketch bands real re-takes and re-encoded copies share, per frame and per session, on the
 * tuning clips only (cap12, cap13; the held-out clip is not read): the figures the near-copy
 * thresholds (features/liveness/frame-sketch.ts) are judged against.
 *
 *   npx tsx scripts/evaluate/near-copy-sessions.ts [--dir var/liveness-footage]
 *
 * Needs `npm run evaluate -- liveness-footage` run first (the frames measured in
 * var/cache/liveness-footage and the recorded sets in --dir).
 *
 * - Re-takes: each tuning session (its pose and light frames, as filmed) against every "earlier
 *   session" a real retry of that man could be: 11 frames 0.5 s apart (5 s) of the other clip, or of
 *   its own clip with every frame 10 s and more away. Per frame of the session: the most bands it
 *   shares with a frame of that earlier session.
 * - Copies: each `injected_reencoded` variant of the tuning set (JPEG 50 to 95, scale 0.7 to 1.0,
 *   crop 0 to 8 px) against the bona fide session it copies, every frame's landmarks measured by the
 *   engine on the copy, light frames as the service's light jobs measure them (liveness.ts
 *   `measureLight`).
 *
 * Per session pair it prints the statistics a rule could use: the most bands of any frame (the rule in
 * force, NEAR_COPY_FRAME_BANDS), the second and third most, the median frame, and the number of frames
 * at or above each count.
 */
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

import { loadConfig } from '../../processes/config.js';
import { FaceEngine } from '../../features/face/worker/pipeline/engine.js';
import { isFaceError } from '../../platform/face/face-error.js';
import { decodeRgb as decodeNormalised, normaliseUpload } from '../../platform/face/image.js';
import { equalBands, faceGrid, NEAR_COPY_FRAME_BANDS, sketch, sketchDirections } from '../../features/liveness/frame-sketch.js';
import { CLIPS, cutSessions, type ClipFrames, type MeasuredFrame } from './footage.js';
import { measureLight } from './liveness.js';
import { decodeRgb } from './liveness-views.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dirs = sketchDirections(Buffer.from('evaluate-liveness-sketch-key'));

type Face = Extract<MeasuredFrame, { outcome: 'face' }>;

/** Per frame of `mine`: the most bands it shares with a frame of `earlier`. */
const bestPerFrame = (mine: readonly Uint8Array[], earlier: readonly Uint8Array[]) =>
  mine.map((a) => earlier.reduce((best, b) => Math.max(best, equalBands(a, b)), 0));

/** The statistics of one session pair: its frames' best counts, sorted high to low. */
function stats(best: readonly number[]) {
  const s = [...best].sort((a, b) => b - a);
  return {
    max: s[0] ?? 0,
    second: s[1] ?? 0,
    third: s[2] ?? 0,
    median: s[Math.floor(s.length / 2)] ?? 0,
    top2: (s[0] ?? 0) + (s[1] ?? 0),
    top3: (s[0] ?? 0) + (s[1] ?? 0) + (s[2] ?? 0),
    sorted: s,
  };
}

async function poseSketch(engine: FaceEngine, file: string): Promise<Uint8Array | null> {
  const { jpeg } = await normaliseUpload(readFileSync(file));
  try {
    const r = await engine.liveness(jpeg, 'single', { quality: false });
    return sketch(faceGrid(await decodeNormalised(jpeg), r.face.landmarks5), dirs);
  } catch (e) {
    if (!isFaceError(e)) throw e;
    return null;
  }
}

/** A recorded sequence's sketches, pose frames as the liveness stage measures them, light frames as the light jobs do. */
async function sequenceSketches(engine: FaceEngine, dir: string): Promise<Uint8Array[]> {
  const pose = readdirSync(dir)
    .filter((f) => f.endsWith('.jpg'))
    .sort();
  const out: Uint8Array[] = [];
  for (const f of pose) {
    const s = await poseSketch(engine, path.join(dir, f));
    if (s) out.push(s);
  }
  const lightDir = path.join(dir, 'light');
  if (existsSync(lightDir)) {
    const light = readdirSync(lightDir)
      .filter((f) => f.endsWith('.jpg'))
      .sort()
      .map((f) => readFileSync(path.join(lightDir, f)));
    out.push(...(await measureLight(engine, light, false)).sketches);
  }
  return out;
}

const hist = (xs: readonly number[]) => {
  const h = new Map<number, number>();
  for (const x of xs) h.set(x, (h.get(x) ?? 0) + 1);
  return [...h]
    .sort((a, b) => a[0] - b[0])
    .map(([k, n]) => `${k}:${n}`)
    .join(' ');
};

async function main() {
  const { values } = parseArgs({ options: { dir: { type: 'string', default: 'var/liveness-footage' } } });
  const setDir = path.resolve(ROOT, values.dir);
  const cfg = loadConfig();
  const engine = await FaceEngine.load(path.resolve(ROOT, cfg.face.modelsDir));
  const cache = path.join(ROOT, 'var/cache/liveness-footage/frames');
  // Tuning clips only: the held-out clip is neither read nor measured here.
  const clips: ClipFrames[] = CLIPS.filter((c) => c.role === 'tune').map((clip) => {
    const dir = path.join(cache, clip.name);
    return { clip, dir, fps: clip.fps, frames: JSON.parse(readFileSync(path.join(dir, 'measured.json'), 'utf8')) as MeasuredFrame[] };
  });
  const sk = new Map<string, Uint8Array>();
  const sketchOf = async (cf: ClipFrames, i: number) => {
    const k = `${cf.clip.name}:${i}`;
    if (!sk.has(k)) {
      const f = cf.frames[i] as Face;
      sk.set(k, sketch(faceGrid(await decodeRgb(readFileSync(path.join(cf.dir, f.file))), f.landmarks5), dirs));
    }
    return sk.get(k)!;
  };

  // Re-takes.
  const step = 5; // 0.5 s at 10 frames a second
  const retake: { session: string; st: ReturnType<typeof stats> }[] = [];
  const retakeFrames: number[] = [];
  for (const cf of clips)
    for (const s of cutSessions(cf)) {
      const idx = [...s.pose, ...s.light].filter((i) => cf.frames[i]!.outcome === 'face');
      const mine = await Promise.all(idx.map((i) => sketchOf(cf, i)));
      let worst: ReturnType<typeof stats> | null = null;
      const perFrame = mine.map(() => 0);
      for (const other of clips)
        for (let start = 0; start + 10 * step < other.frames.length; start += step) {
          const window = Array.from({ length: 11 }, (_, k) => start + k * step).filter((j) => other.frames[j]!.outcome === 'face');
          if (other === cf && window.some((j) => idx.some((i) => Math.abs(i - j) < 10 * cf.fps))) continue;
          if (window.length < 6) continue;
          const best = bestPerFrame(mine, await Promise.all(window.map((j) => sketchOf(other, j))));
          best.forEach((b, k) => (perFrame[k] = Math.max(perFrame[k]!, b)));
          const st = stats(best);
          // The worst window for this session: the highest second-best frame, then the highest best.
          if (!worst || st.second > worst.second || (st.second === worst.second && st.max > worst.max)) worst = st;
          retake.push({ session: s.name, st });
        }
      retakeFrames.push(...perFrame);
      console.log(`re-take ${s.name}: ${mine.length} frames; worst window (by 2nd best) sorted ${worst?.sorted.join(',')}`);
    }

  // Copies.
  const copies: { name: string; st: ReturnType<typeof stats> }[] = [];
  const copyFrames: number[] = [];
  const bona = new Map<string, Uint8Array[]>();
  const injDir = path.join(setDir, 'tune', 'injected_reencoded');
  for (const name of readdirSync(injDir).sort()) {
    const session = name.replace(/-v\d+$/, '');
    if (!bona.has(session)) bona.set(session, await sequenceSketches(engine, path.join(setDir, 'tune', 'bona_fide', session)));
    const best = bestPerFrame(await sequenceSketches(engine, path.join(injDir, name)), bona.get(session)!);
    copyFrames.push(...best);
    const st = stats(best);
    copies.push({ name, st });
    console.log(`copy ${name}: sorted ${st.sorted.join(',')}`);
  }
  await engine.release();

  console.log(`\nper frame, the most bands shared (near copy per frame at ${NEAR_COPY_FRAME_BANDS}+):`);
  console.log(`  re-take frames (against every earlier window): ${hist(retakeFrames)}`);
  console.log(`  copied frames (against the session copied):    ${hist(copyFrames)}`);
  console.log(`per session pair (re-takes: ${retake.length} session × window pairs; copies: ${copies.length}):`);
  for (const key of ['max', 'second', 'third', 'median', 'top2', 'top3'] as const) {
    console.log(`  ${key.padEnd(6)} re-takes ${hist(retake.map((r) => r.st[key]))}`);
    console.log(`  ${''.padEnd(6)} copies   ${hist(copies.map((c) => c.st[key]))}`);
  }
  for (const th of [20, 21, 22, 23, 24, 25]) {
    const count = (sorted: number[]) => sorted.filter((x) => x >= th).length;
    console.log(`  frames at ${th}+: re-takes ${hist(retake.map((r) => count(r.st.sorted)))}; copies ${hist(copies.map((c) => count(c.st.sorted)))}`);
  }
}

await main();
