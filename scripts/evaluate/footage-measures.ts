/**
 * The measurements on real footage (scripts/evaluate/footage.ts) that set the liveness judgement's
 * thresholds: the passive model per session, the light check's chance acceptance and the reflection
 * it needs, and how many sketch bands real re-takes and copies share. Printed by
 * `npm run evaluate -- liveness-footage`; what they mean: docs/face-engine.md "Liveness on real footage".
 * Thresholds are chosen on the tuning clips only; the held-out clip's figures are printed beside them.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { estimatePose, PASSIVE_SESSION_THRESHOLD, passiveSessionScore } from '../../features/liveness/decision.js';
import { equalBands, faceGrid, NEAR_COPY_FRAME_BANDS, sketch, sketchDirections } from '../../features/liveness/frame-sketch.js';
import { drawLights, judgeLightResponse, LIGHT_THRESHOLDS, sampleLightFrame, type LightSample } from '../../features/liveness/light-response.js';
import { decodeRgb, encodeJpeg, rng, type Rgb } from './liveness-views.js';
import { addNoise, relight } from './light-sim.js';
import type { ClipFrames, FootageSession, MeasuredFrame } from './footage.js';

type Face = Extract<MeasuredFrame, { outcome: 'face' }>;
type Fit = { correlation: number; strength: number; spread: number };
/** Whether a fit passes the check at the given thresholds (judgeLightResponse's rule, without the count and face checks). */
const passes = (f: Fit, minCorrelation: number, minStrength: number) => f.spread >= minStrength && f.correlation >= minCorrelation && f.strength >= minStrength;
/** Threshold pairs the figures are printed for (the chosen one among them). */
const GRID: [number, number][] = [
  [0.7, 0.02],
  [0.7, 0.04],
  [0.8, 0.03],
  [0.8, 0.04],
  [0.8, 0.05],
  [0.85, 0.04],
  [0.85, 0.05],
  [0.9, 0.04],
  [0.9, 0.05],
];
const quantile = (xs: readonly number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))))]! : Number.NaN;
};
const median = (xs: readonly number[]) => quantile(xs, 0.5);
const f3 = (x: number) => x.toFixed(3);
const pct = (a: number, n: number) => `${n ? ((100 * a) / n).toFixed(n >= 1000 ? 2 : 1) : '-'} % (${a}/${n})`;

/**
 * Windows of a clip for the passive model: every face frame with the three frames 0.4, 0.8 and 1.2 s
 * later (four frames 0.4 s apart, the pose frames a session sends, judged without the pose and light
 * checks). The bar: at most 5 % of a tuning clip's windows refused.
 */
export const PASSIVE_WINDOW = { frames: 4, apartSeconds: 0.4 } as const;
export function passiveWindows(cf: ClipFrames): number[][] {
  const d = Math.max(1, Math.round(PASSIVE_WINDOW.apartSeconds * cf.fps));
  const out: number[][] = [];
  for (let i = 0; i + (PASSIVE_WINDOW.frames - 1) * d < cf.frames.length; i++) {
    const t = Array.from({ length: PASSIVE_WINDOW.frames }, (_, j) => cf.frames[i + j * d]!);
    if (t.every((f) => f.outcome === 'face')) out.push(t.map((f) => (f as Face).livenessScore));
  }
  return out;
}

export function printPassive(clips: readonly ClipFrames[], sessions: readonly FootageSession[], threshold: number, log: (l: string) => void): void {
  log(
    `passive model on real footage (frame threshold LIVENESS_THRESHOLD ${threshold}; session rule: median of the frames seen at a step ≥ ${PASSIVE_SESSION_THRESHOLD})`,
  );
  log(
    `clip     role     frames  below thr.   frame median   windows of ${PASSIVE_WINDOW.frames} frames ${PASSIVE_WINDOW.apartSeconds} s apart: refused by "any frame below"   median q02 q05 q10   refused by the median rule (bar: at most 5 % on a tuning clip)`,
  );
  for (const cf of clips) {
    const scores = cf.frames.filter((f): f is Face => f.outcome === 'face').map((f) => f.livenessScore);
    const triples = passiveWindows(cf);
    const meds = triples.map(passiveSessionScore);
    const refused = meds.filter((m) => m < PASSIVE_SESSION_THRESHOLD).length;
    log(
      `${cf.clip.name.padEnd(8)} ${cf.clip.role.padEnd(8)} ${String(scores.length).padStart(6)}  ${pct(scores.filter((s) => s < threshold).length, scores.length).padEnd(18)} ${f3(median(scores))}   ${pct(triples.filter((t) => t.some((s) => s < threshold)).length, triples.length).padEnd(22)}   ${[0.02, 0.05, 0.1].map((q) => f3(quantile(meds, q))).join(' ')}   ${pct(refused, meds.length)}${cf.clip.role === 'tune' ? (refused <= 0.05 * meds.length ? '  meets the bar' : '  MISSES the bar') : ''}`,
    );
  }
  for (const s of sessions) {
    const cf = clips.find((c) => c.clip.name === s.clip)!;
    const sc = s.pose.map((i) => (cf.frames[i] as Face).livenessScore);
    log(`  session ${s.name}: pose frames' scores ${sc.map((x) => x.toFixed(2)).join(' ')}, median ${f3(median(sc))}`);
  }
}

/** Windows of `n` centre frames half a second apart: what a session's light frames are, without flashes. */
export function centreWindows(cf: ClipFrames, n: number): number[][] {
  const step = Math.max(1, Math.round(0.5 * cf.fps));
  const centre = cf.frames.map((f) => f.outcome === 'face' && Math.abs(estimatePose(f.landmarks5).yaw) < 0.1);
  const out: number[][] = [];
  for (let i = 0; i + (n - 1) * step < cf.frames.length; i++) {
    const w = Array.from({ length: n }, (_, j) => i + j * step);
    if (w.every((k) => centre[k])) out.push(w);
  }
  return out;
}

async function frameRgb(cf: ClipFrames, i: number): Promise<Rgb> {
  return decodeRgb(readFileSync(path.join(cf.dir, cf.frames[i]!.file)));
}

/**
 * Chance acceptance: the light check run on real frames taken without any flash, against random
 * sequences (`draws` per window). Also the spread such frames show (what `minStrength` must exceed).
 */
export async function chanceAcceptance(cf: ClipFrames, draws: number, seed: number) {
  const samples = new Map<number, LightSample>();
  const r = rng(seed);
  const randomInt = (k: number) => Math.floor(r() * k);
  let accepted = 0,
    judged = 0;
  const spreads: number[] = [];
  const byWhy: Record<string, number> = {};
  const fits: Fit[] = [];
  for (const n of [6, 7, 8]) {
    for (const w of centreWindows(cf, n)) {
      for (const i of w) if (!samples.has(i)) samples.set(i, sampleLightFrame(await frameRgb(cf, i), (cf.frames[i] as Face).box));
      const ss = w.map((i) => samples.get(i)!);
      for (let d = 0; d < draws; d++) {
        const v = judgeLightResponse(drawLights(n, randomInt), ss);
        fits.push(v);
        judged++;
        if (v.followed) accepted++;
        byWhy[v.why ?? 'followed'] = (byWhy[v.why ?? 'followed'] ?? 0) + 1;
        if (d === 0) spreads.push(v.spread);
      }
    }
  }
  return { accepted, judged, windows: spreads.length, spreads, byWhy, fits };
}

/**
 * A synthetic reflection of strength k (light-sim.ts: the face's lit channels × (1 + k), the room's
 * × (1 + k/10)) on real centre frames, JPEG-encoded at quality 85 as a client would send them: the
 * share of sequences the check accepts at each k, and the share of perfect responses to another
 * random sequence (an earlier session's light frames sent again) it accepts.
 */
export async function reflectionSweep(cf: ClipFrames, ks: readonly number[], windows: number, seed: number) {
  const r = rng(seed);
  const randomInt = (k: number) => Math.floor(r() * k);
  const all = [6, 7, 8].flatMap((n) => centreWindows(cf, n));
  const pick = Array.from({ length: Math.min(windows, all.length) }, (_, j) => all[Math.floor((j * all.length) / Math.min(windows, all.length))]!);
  const rows: { k: number; passed: number; n: number; other: number; strengths: number[]; fits: Fit[]; otherFits: Fit[] }[] = [];
  for (const k of ks) {
    let passed = 0,
      other = 0;
    const strengths: number[] = [];
    const fits: Fit[] = [];
    const otherFits: Fit[] = [];
    for (const w of pick) {
      const lights = drawLights(w.length, randomInt);
      const ss: LightSample[] = [];
      for (const [j, i] of w.entries()) {
        const box = (cf.frames[i] as Face).box;
        const lit = addNoise(relight(await frameRgb(cf, i), box, lights[j]!, { k }), 2, r);
        ss.push(sampleLightFrame(await decodeRgb(await encodeJpeg(lit, 85)), box));
      }
      const v = judgeLightResponse(lights, ss);
      strengths.push(v.strength);
      fits.push(v);
      if (v.followed) passed++;
      const o = judgeLightResponse(drawLights(w.length, randomInt), ss);
      otherFits.push(o);
      if (o.followed) other++;
    }
    rows.push({ k, passed, n: pick.length, other, strengths, fits, otherFits });
  }
  return rows;
}

/** The sketch of a frame's face (pixels as sent: `jpeg`), with the landmarks measured on the original. */
async function sketchOf(jpeg: Buffer, l5: readonly (readonly [number, number])[], dirs: Int8Array, shift: [number, number] = [0, 0], scale = 1) {
  const rgb = await decodeRgb(jpeg);
  return sketch(
    faceGrid(
      rgb,
      l5.map((p) => [(p[0] - shift[0]) * scale, (p[1] - shift[1]) * scale] as [number, number]),
    ),
    dirs,
  );
}

/**
 * Sketch bands shared, per frame: (a) real re-takes — each pose frame of a tuning session against
 * every frame of the other clip (another session of the same man, same desk) and against the frames
 * of its own clip at least 10 s away; (b) copies of the frame — re-encoded (quality 70), rescaled
 * (0.9), recropped by 3 pixels — against the frame. Landmarks of copies are re-measured by the engine
 * in the service; here the original's are moved with the copy, which the engine's jitter makes
 * slightly optimistic for copies (docs say so).
 */
export async function nearCopyBands(
  clips: readonly ClipFrames[],
  sessions: readonly FootageSession[],
  measure: (jpeg: Buffer) => Promise<Face['landmarks5'] | null>,
) {
  const dirs = sketchDirections(Buffer.from('evaluate-liveness-sketch-key'));
  const sk = new Map<string, Uint8Array>();
  const key = (cf: ClipFrames, i: number) => `${cf.clip.name}:${i}`;
  const tune = clips.filter((c) => c.clip.role === 'tune');
  // Every face frame of the tuning clips, one in two (10 fps: 0.2 s apart).
  for (const cf of tune)
    for (let i = 0; i < cf.frames.length; i += 2) {
      const f = cf.frames[i]!;
      if (f.outcome === 'face') sk.set(key(cf, i), await sketchOf(readFileSync(path.join(cf.dir, f.file)), f.landmarks5, dirs));
    }
  const retake: number[] = [];
  const copies: Record<string, number[]> = { reencoded: [], rescaled: [], recropped: [] };
  // Per session: the most bands one of its frames shares (a session fails on one frame).
  const sessionRetake: number[] = [];
  const sessionCopies: Record<string, number[]> = { reencoded: [], rescaled: [], recropped: [] };
  for (const s of sessions.filter((x) => tune.some((c) => c.clip.name === x.clip))) {
    const cf = clips.find((c) => c.clip.name === s.clip)!;
    const firstRetake = retake.length;
    const firstCopy = Object.fromEntries(Object.entries(copies).map(([k, v]) => [k, v.length]));
    for (const i of [...s.pose, ...s.light]) {
      const f = cf.frames[i] as Face;
      const mine = await sketchOf(readFileSync(path.join(cf.dir, f.file)), f.landmarks5, dirs);
      let best = 0;
      for (const [k, other] of sk) {
        const [clip, j] = [k.slice(0, k.indexOf(':')), Number(k.slice(k.indexOf(':') + 1))];
        if (clip === s.clip && Math.abs(j - i) < 10 * cf.fps) continue;
        best = Math.max(best, equalBands(mine, other));
      }
      retake.push(best);
      const jpeg = readFileSync(path.join(cf.dir, f.file));
      const meta = await sharp(jpeg).metadata();
      const variants: [string, Buffer][] = [
        ['reencoded', await sharp(jpeg).jpeg({ quality: 70 }).toBuffer()],
        [
          'rescaled',
          await sharp(jpeg)
            .resize(Math.round(meta.width! * 0.9))
            .jpeg({ quality: 90 })
            .toBuffer(),
        ],
        [
          'recropped',
          await sharp(jpeg)
            .extract({ left: 3, top: 3, width: meta.width! - 6, height: meta.height! - 6 })
            .jpeg({ quality: 90 })
            .toBuffer(),
        ],
      ];
      for (const [name, v] of variants) {
        const l5 = await measure(v);
        if (!l5) continue;
        copies[name]!.push(equalBands(mine, await sketchOf(v, l5, dirs)));
      }
    }
    sessionRetake.push(Math.max(...retake.slice(firstRetake)));
    for (const k of Object.keys(copies)) sessionCopies[k]!.push(Math.max(...copies[k]!.slice(firstCopy[k]!)));
  }
  return { retake, copies, sessionRetake, sessionCopies };
}

export async function printLightAndCopies(
  clips: readonly ClipFrames[],
  sessions: readonly FootageSession[],
  measure: (jpeg: Buffer) => Promise<Face['landmarks5'] | null>,
  log: (l: string) => void,
  o: { draws: number; sweepWindows: number },
): Promise<void> {
  log(
    `\nlight check without flashes (chance acceptance; LIGHT_THRESHOLDS ${JSON.stringify(LIGHT_THRESHOLDS)}): windows of 6 to 8 centre frames 0.5 s apart, ${o.draws} random sequences each`,
  );
  const chanceFits: Record<string, Fit[]> = {};
  for (const cf of clips) {
    const c = await chanceAcceptance(cf, o.draws, 11);
    chanceFits[cf.clip.name] = c.fits;
    log(
      `  ${cf.clip.name.padEnd(7)} ${cf.clip.role.padEnd(8)} accepted ${pct(c.accepted, c.judged)}; ${c.windows} windows, spread q50 ${f3(quantile(c.spreads, 0.5))} q99 ${f3(quantile(c.spreads, 0.99))} max ${f3(Math.max(...c.spreads))}; ${JSON.stringify(c.byWhy)}`,
    );
  }
  const ks = [0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3];
  log(
    `\nsynthetic reflection k (face's lit channels × (1 + k), the room's × (1 + k/10); JPEG 85): sequences accepted; a perfect response to another sequence accepted`,
  );
  const sweeps: Record<string, Awaited<ReturnType<typeof reflectionSweep>>> = {};
  for (const cf of clips) {
    const rows = await reflectionSweep(cf, ks, o.sweepWindows, 12);
    sweeps[cf.clip.name] = rows;
    log(`  ${cf.clip.name} (${cf.clip.role})`);
    for (const row of rows)
      log(
        `    k ${row.k.toFixed(2)}: accepted ${pct(row.passed, row.n).padEnd(16)} strength median ${f3(median(row.strengths))}; another sequence's response accepted ${pct(row.other, row.n)}`,
      );
  }
  log(
    `\nthreshold pairs (minCorrelation, minStrength): chance acceptance per clip; the least k at which 95 % of sequences pass; another sequence's perfect response accepted at k 0.15`,
  );
  for (const [mc, ms] of GRID) {
    const cells = clips.map((cf) => {
      const ch = chanceFits[cf.clip.name]!;
      const acc = ch.filter((f) => passes(f, mc, ms)).length;
      const rows = sweeps[cf.clip.name]!;
      const k95 = rows.find((row) => row.fits.filter((f) => passes(f, mc, ms)).length >= 0.95 * row.n)?.k;
      const at15 = rows.find((row) => row.k === 0.15);
      const other = at15 ? at15.otherFits.filter((f) => passes(f, mc, ms)).length : 0;
      return `${cf.clip.name} chance ${((100 * acc) / ch.length).toFixed(3)} % k95 ${k95 ?? '>0.3'} other ${other}/${at15?.n ?? 0}`;
    });
    log(
      `  ${mc.toFixed(2)} ${ms.toFixed(2)}${mc === LIGHT_THRESHOLDS.minCorrelation && ms === LIGHT_THRESHOLDS.minStrength ? ' (in force)' : ''}: ${cells.join('; ')}`,
    );
  }
  const nc = await nearCopyBands(clips, sessions, measure);
  const hist = (xs: number[]) => `min ${Math.min(...xs)} q50 ${median(xs)} max ${Math.max(...xs)} (n ${xs.length})`;
  log(`\nsketch bands shared (near copy at ${NEAR_COPY_FRAME_BANDS}+ of 32): tuning sessions' pose and light frames; per frame, and per session (its most)`);
  log(`  real re-takes (other clip, or own clip ≥ 10 s away): per frame ${hist(nc.retake)}; per session ${hist(nc.sessionRetake)}`);
  for (const [k, xs] of Object.entries(nc.copies)) log(`  ${k.padEnd(10)} copies: per frame ${hist(xs)}; per session ${hist(nc.sessionCopies[k]!)}`);
  for (const th of [22, 23, 24, 25, 26, 27]) {
    const frac = (xs: number[]) => `${xs.filter((x) => x >= th).length}/${xs.length}`;
    log(
      `  at ${th}: frames of re-takes taken for copies ${frac(nc.retake)}, re-take sessions refused ${frac(nc.sessionRetake)}; copies missed per frame ${Object.entries(
        nc.copies,
      )
        .map(([k, xs]) => `${k} ${xs.filter((x) => x < th).length}/${xs.length}`)
        .join(', ')}; copied sessions missed ${Object.entries(nc.sessionCopies)
        .map(([k, xs]) => `${k} ${xs.filter((x) => x < th).length}/${xs.length}`)
        .join(', ')}`,
    );
  }
}
