/**
 * `npm run evaluate -- liveness`: presentation-attack detection of liveness sessions measured with
 * ISO/IEC 30107-3 names. APCER per attack type (attacks accepted / attacks presented) and BPCER (bona
 * fide sequences rejected / bona fide sequences presented), each with exact 95 % (Clopper-Pearson)
 * bounds.
 *
 * Every sequence goes through the product's own judgement: upload normalisation, the face engine's
 * liveness stage on every frame ('single' mode, as the service asks), the embedder, and the pure
 * decision of features/liveness/decision.ts, in the service's order; the keyed-digest replay check is
 * played by a set of SHA-256 digests shared by all sequences of the run (as Redis is by all sessions),
 * and the near-copy check (features/liveness/frame-sketch.ts, when LIVENESS_NEAR_REPLAY_WINDOW_SECONDS
 * is above 0) by the sketches of every earlier sequence of the run, compared band by band as the
 * service's keyed band digests are. Whatever the setting, the run prints how many bands every kind of
 * sequence shares with one earlier sequence (what the threshold NEAR_COPY_BANDS was set from).
 * Only `session_expired` is not exercised (no attack here is late).
 *
 * The sequences (how each is made: scripts/evaluate/liveness-views.ts; what that means:
 * docs/face-engine.md "Liveness sessions"):
 * - bona fide: views synthesised from a frontal photo, one per step asked (poses drawn around the
 *   step's: turns 20° to 32°, look-up 14° to 24°, centre within 4°), sometimes a frame in motion
 *   between two steps, a return to centre when fewer than three frames, each frame moved, lit and
 *   noised a little differently;
 * - `repeated`: one capture of the photo (moved, noised), the same bytes sent three times;
 * - `jittered`: the photo moved, scaled, re-lit and re-encoded at another quality for each frame;
 * - `print_tilted`: a print of the photo (blur, lifted blacks, colour cast) tilted in front of the
 *   camera as each step asks;
 * - `screen_replay`: a video of the person performing exactly the steps asked, shown on a screen
 *   (moiré, gamma, blur, a bright cast) and filmed: the pose challenge is followed by construction,
 *   only the passive model can refuse it;
 * - `spliced`: a bona fide sequence with one frame (not the first) of another person;
 * - `replayed`: the exact frames of an earlier bona fide session of the run, sent to a new session;
 * - `out_of_order`: bona fide views of other steps than those asked (a turn swapped for another);
 * - `injected_reencoded`: an earlier bona fide sequence, frames re-encoded (new bytes), injected into a
 *   new session whose steps are drawn anew: by default accepted when the draw repeats the recorded
 *   steps; refused as `replayed_frames` when the near-copy check is on and sees every frame as a copy.
 *
 * Tuned apart from measured: the sources are split by person. The tuning half (Bush, Hopper) and the
 * measured half (Chavez, Powell, Sharon, Collins) never share a photo of one person; `--set tune`
 * evaluates the first, the default `--set measure` the second, with other random draws (seeds).
 */
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FaceEngine } from '../../features/face/worker/pipeline/engine.js';
import { isFaceError } from '../../platform/face/face-error.js';
import { decodeRgb as decodeNormalised, encodeNormalisedJpeg, jpegAsItCame, normaliseUpload, normaliseUploadRgb } from '../../platform/face/image.js';
import { DEFAULT_LIGHT_JOB_FRAMES, LIGHT_FRAME_MAX_SIDE, lightJobRuns } from '../../platform/jobs/light.js';
import { screenPattern } from '../../features/liveness/screen-pattern.js';
import {
  equalBands,
  faceGrid,
  NEAR_COPY_FRAME_BANDS,
  NEAR_COPY_SESSION_TOP3,
  sketch,
  SKETCH_BANDS,
  sketchDirections,
} from '../../features/liveness/frame-sketch.js';
import { drawLights, judgeLightResponse, sampleLightFrame, type LightSample, type LightVerdict } from '../../features/liveness/light-response.js';
import {
  drawSteps,
  estimatePose,
  judgeFaces,
  onePerson,
  LIGHT_SAME_PERSON_COSINE,
  type FailureReason,
  type FrameFace,
  type LivenessStep,
} from '../../features/liveness/decision.js';
import { FIXTURE_PHOTOS, FIXTURES_DIR } from '../../test/fixtures/faces/labels.js';
import { decodeRgb, encodeJpeg, flatTilt, rng, synthView, type Pt, type Rgb } from './liveness-views.js';
import { rate, type Rate } from './stats.js';
import { relight } from './light-sim.js';

export const ATTACK_TYPES = [
  'repeated',
  'jittered',
  'print_tilted',
  'screen_replay',
  'spliced',
  'replayed',
  'out_of_order',
  'injected_reencoded',
  'photo_warp',
  'photo_warp_relit',
] as const;
export type AttackType = (typeof ATTACK_TYPES)[number];

/** Sources split by person: the thresholds were set on the first half, the figures come from the second. */
export const SOURCE_SETS = {
  tune: ['lfw/Bush_1.png', 'lfw/Bush_2.png', 'grace_hopper_a.jpg'],
  measure: ['lfw/Chavez_1.png', 'lfw/Powell_1.png', 'lfw/Powell_3.png', 'astronaut.png'],
} as const;

interface Source {
  file: string;
  identity: string;
  rgb: Rgb;
  l5: Pt[];
  frontalJpeg: Buffer;
  /** Degrees of yaw added to every synthesised view: the source's own turn undone. */
  yawOffsetDeg: number;
}

export interface SequenceVerdict {
  status: 'passed' | 'failed';
  reason?: FailureReason;
  /** What was measured on each frame (yaw, pitch, step seen, passive score, cosine to the reference frame). */
  detail?: string;
  /** The most sketch bands one frame shares with an earlier session's frame. */
  copyBands?: number;
}

export interface LivenessEvaluation {
  /** The synthesised set (`tune`, `measure`), or `recorded` (`sources`: the folder read). */
  set: string;
  nearReplay: boolean;
  /** Per kind of sequence ('bona fide' or an attack type): each sequence's `copyBands`. */
  copyBands: Record<string, number[]>;
  sources: string[];
  skippedSources: Record<string, string>;
  bpcer: Rate;
  bonaFideReasons: Record<string, number>;
  /** Per attack type (this project's ATTACK_TYPES, or a recorded set's own kinds). */
  apcer: Record<string, Rate & { reasons: Record<string, number> }>;
}

/** The service's judgement of one sequence (features/liveness/service.ts), without HTTP and Redis. */
/**
 * What the run has received, shared by all its sequences as Redis is by all sessions: the digests of
 * the frames' bytes, and the sketches of the frames' faces of every earlier session (frame-sketch.ts;
 * the service keeps keyed digests of their bands, which compare alike).
 */
export interface Received {
  digests: Set<string>;
  sketches: Uint8Array[][];
  /** LIVENESS_NEAR_REPLAY_WINDOW_SECONDS above 0: a session whose every frame is a near copy of one earlier session's is `replayed_frames`. */
  nearReplay: boolean;
}

const SKETCH_KEY = Buffer.from('evaluate-liveness-sketch-key');
let directions: Int8Array | null = null;

/** The most bands one frame of `frames` shares with a frame of an earlier session (0 to SKETCH_BANDS): one near copy fails the session. */
export function nearCopyBands(frames: readonly Uint8Array[], earlier: readonly (readonly Uint8Array[])[]): number {
  let best = 0;
  for (const e of earlier) for (const f of frames) for (const g of e) best = Math.max(best, equalBands(f, g));
  return best;
}

/**
 * Over earlier sessions, the most the three frames of `frames` sharing the most bands with one of
 * them share together (frame-sketch.ts `nearCopySession`: NEAR_COPY_SESSION_TOP3 and up, a copy).
 */
export function nearCopyTop3(frames: readonly Uint8Array[], earlier: readonly (readonly Uint8Array[])[]): number {
  let best = 0;
  for (const e of earlier) {
    const perFrame = frames.map((f) => e.reduce((m, g) => Math.max(m, equalBands(f, g)), 0)).sort((a, b) => b - a);
    best = Math.max(
      best,
      perFrame.slice(0, 3).reduce((a, b) => a + b, 0),
    );
  }
  return best;
}

/** A session's light frames: the colours asked and the frames captured under them (null: the session carries no lights). */
export interface LightFrames {
  lights: readonly string[];
  frames: readonly Buffer[];
}

/** The light check's measures on a session's light frames, as the service's light job takes them. */
export interface LightMeasures {
  samples: (LightSample | null)[];
  /** Each frame's face grid (frame-sketch.ts), null without a face: the near-copy sketches' source. */
  grids: (Float32Array | null)[];
  sketches: Uint8Array[];
  /** Each frame's face embedding (null: no face there, or not asked for). */
  embeddings: (number[] | null)[];
}

/**
 * A session's light frames measured as the service does (features/liveness/service.ts, platform/jobs/light.ts):
 * each made at most LIGHT_FRAME_MAX_SIDE (a JPEG already that small as it came), in the jobs the
 * service cuts them into (`lightJobRuns`, LIVENESS_LIGHT_JOB_FRAMES's default), in each the face
 * detected on the first frame and followed on the others (FaceEngine.lightFrames), the grid and colour
 * sample taken on the pixels the job decoded, and (`embed`) every frame's face embedded.
 */
export async function measureLight(engine: FaceEngine, frames: readonly Buffer[], embed = true, perJob = DEFAULT_LIGHT_JOB_FRAMES): Promise<LightMeasures> {
  directions ??= sketchDirections(SKETCH_KEY);
  const jpegs = await Promise.all(
    frames.map(
      async (f) =>
        (await jpegAsItCame(f, { maxSide: LIGHT_FRAME_MAX_SIDE })) ?? encodeNormalisedJpeg(await normaliseUploadRgb(f, { maxSide: LIGHT_FRAME_MAX_SIDE })),
    ),
  );
  const parts = [];
  for (const [start, end] of lightJobRuns(jpegs.length, perJob)) parts.push(await engine.lightFrames(jpegs.slice(start, end), embed));
  const r = { frames: parts.flatMap((p) => p.frames), pixels: parts.flatMap((p) => p.pixels), embeddings: parts.flatMap((p) => p.embeddings) };
  const samples = r.frames.map((f, i) => (f.ok ? sampleLightFrame(r.pixels[i]!, f.face.box as [number, number, number, number]) : null));
  const grids = r.frames.map((f, i) => (f.ok ? faceGrid(r.pixels[i]!, f.face.landmarks5) : null));
  const sketches = grids.flatMap((g) => (g ? [sketch(g, directions!)] : []));
  return { samples, grids, sketches, embeddings: r.embeddings };
}

/** Each light frame's face embedding's cosine with `reference` (null: no face there). */
export function lightCosines(m: LightMeasures, reference: readonly number[]): (number | null)[] {
  return m.embeddings.map((e) => (e ? e.reduce((acc, x, k) => acc + x * reference[k]!, 0) : null));
}

/**
 * The light check's verdict as the service reaches it (service.ts `lightSamples`): no sample counts
 * unless every light frame's face is the person of the pose frames' reference by its embedding
 * (LIGHT_SAME_PERSON_COSINE). `reference` null: the identity binding is not applied (the chance match of
 * frames without flashes).
 */
export function judgeMeasuredLight(lights: readonly string[], m: LightMeasures, reference: readonly number[] | null): LightVerdict {
  const none = m.samples.map(() => null);
  const bound =
    reference === null ||
    m.samples.every((sample, i) => sample === null || (m.embeddings[i] != null && onePerson([reference, m.embeddings[i]!], 0, LIGHT_SAME_PERSON_COSINE)));
  return judgeLightResponse(lights, bound ? m.samples : none);
}

/** The light check of a session without the identity binding (the chance match): measured as the service does, judged on the samples. */
export async function judgeLight(engine: FaceEngine, l: LightFrames): Promise<LightVerdict & { sketches: Uint8Array[]; samples: (LightSample | null)[] }> {
  const m = await measureLight(engine, l.frames, false);
  return { ...judgeLightResponse(l.lights, m.samples), sketches: m.sketches, samples: m.samples };
}

export async function judgeSequence(
  engine: FaceEngine,
  frames: readonly Buffer[],
  steps: readonly LivenessStep[],
  received: Received,
  light: LightFrames | null = null,
): Promise<SequenceVerdict> {
  const all = [...frames, ...(light?.frames ?? [])];
  const digests = [...new Set(all.map((f) => createHash('sha256').update(f).digest('hex')))];
  const replayed = digests.some((d) => received.digests.has(d));
  for (const d of digests) received.digests.add(d);
  if (replayed) return { status: 'failed', reason: 'replayed_frames' };
  const measured: FrameFace[] = [];
  const aligned: (Float32Array | null)[] = [];
  const sketches: Uint8Array[] = [];
  let firstJpeg: Buffer | null = null;
  directions ??= sketchDirections(SKETCH_KEY);
  for (const f of frames) {
    const { jpeg } = await normaliseUpload(f);
    firstJpeg ??= jpeg;
    try {
      const r = await engine.liveness(jpeg, 'single', { align: true, quality: false });
      measured.push({ outcome: 'face', landmarks5: r.face.landmarks5, livenessScore: r.livenessScore });
      aligned.push(r.aligned ?? null);
      sketches.push(sketch(faceGrid(await decodeNormalised(jpeg), r.face.landmarks5), directions));
    } catch (e) {
      if (!isFaceError(e) || (e.code !== 'no_face' && e.code !== 'multiple_faces')) throw e;
      measured.push({ outcome: e.code });
      aligned.push(null);
    }
  }
  // The light frames measured as the service's light job does, every frame's face embedded.
  const lm = light ? await measureLight(engine, light.frames) : null;
  if (lm) sketches.push(...lm.sketches);
  const copyBands = nearCopyBands(sketches, received.sketches);
  const copyTop3 = nearCopyTop3(sketches, received.sketches);
  received.sketches.push(sketches);
  const first = measured[0]!;
  const pattern = first.outcome === 'face' ? screenPattern(await decodeNormalised(firstJpeg!), first.landmarks5) : null;
  // In the service's order (service.ts `judge`): the faces judged without the light check, near
  // copies, the faces' verdict, one person, then the light check with the pose frames' person.
  const v = judgeFaces({ frames: measured, steps, screenPattern: pattern });
  let lv: LightVerdict | null = null;
  let lightCos: (number | null)[] = [];
  const describe = (cos: (number | null)[] = []) =>
    `steps ${steps.join(',')}; ` +
    measured
      .map((m, i) => {
        if (m.outcome !== 'face') return `[${m.outcome}]`;
        const p = estimatePose(m.landmarks5);
        return `[${v.stepsSeen[i] ?? '-'} yaw ${p.yaw.toFixed(3)} pitch ${p.pitch.toFixed(3)} live ${m.livenessScore.toFixed(2)}${cos[i] == null ? '' : ` cos ${cos[i]!.toFixed(3)}`}]`;
      })
      .join(' ') +
    (pattern === null ? '' : ` screen ${Math.round(pattern)}`) +
    (lv ? ` light ${lv.followed ? 'followed' : lv.why} r ${lv.correlation.toFixed(2)} strength ${lv.strength.toFixed(3)} spread ${lv.spread.toFixed(3)}` : '') +
    (lightCos.length ? ` light cos ${lightCos.map((c) => (c === null ? '-' : c.toFixed(3))).join(',')}` : '') +
    ` copy bands ${copyBands} top3 ${copyTop3}`;
  if (received.nearReplay && (copyBands >= NEAR_COPY_FRAME_BANDS || copyTop3 >= NEAR_COPY_SESSION_TOP3))
    return { status: 'failed', reason: 'replayed_frames', detail: describe(), copyBands };
  if (v.status === 'failed') return { status: 'failed', reason: v.reason, detail: describe(), copyBands };
  const embeddings = [];
  for (const a of aligned) embeddings.push((await engine.embedAligned(a!)).embedding);
  const ref = embeddings[v.reference]!;
  const cos = embeddings.map((e, i) => (i === v.reference ? null : e.reduce((acc, x, k) => acc + x * ref[k]!, 0)));
  if (!onePerson(embeddings, v.reference)) return { status: 'failed', reason: 'different_faces', detail: describe(cos), copyBands };
  let then = v.then;
  if (light && lm && !(then.status === 'failed' && then.reason === 'challenge_not_followed')) {
    lightCos = lightCosines(lm, ref);
    lv = judgeMeasuredLight(light.lights, lm, ref);
    const withLight = judgeFaces({ frames: measured, steps, screenPattern: pattern, light: lv });
    if (withLight.status === 'needs_identity') then = withLight.then;
  }
  if (then.status === 'failed') return { status: 'failed', reason: then.reason, detail: describe(cos), copyBands };
  return { status: 'passed', detail: describe(cos), copyBands };
}

const uniform = (r: () => number, a: number, b: number) => a + (b - a) * r();

/** The pose a person shows for a step, drawn around the step's own (degrees). */
function poseFor(step: LivenessStep, r: () => number): { yaw: number; pitch: number } {
  const sign = r() < 0.5 ? -1 : 1;
  switch (step) {
    case 'center':
      return { yaw: uniform(r, -4, 4), pitch: uniform(r, -3, 3) };
    case 'turn_left':
      return { yaw: uniform(r, 20, 32), pitch: uniform(r, -4, 4) };
    case 'turn_right':
      return { yaw: -uniform(r, 20, 32), pitch: uniform(r, -4, 4) };
    case 'look_up':
      return { yaw: sign * uniform(r, 0, 4), pitch: uniform(r, 14, 24) };
  }
}

/** Small differences between two frames of one capture: position, scale, light, sensor noise. */
function capture(r: () => number, width: number) {
  const px = width / 200;
  return {
    scale: uniform(r, 0.96, 1.05),
    dx: uniform(r, -4, 4) * px,
    dy: uniform(r, -4, 4) * px,
    gain: uniform(r, 0.92, 1.08),
    noiseSeed: Math.floor(r() * 1e9),
  };
}

/** A bona fide sequence for `steps`: one frame per step, sometimes one in motion, a return to centre if short. */
export async function bonaFide(src: Source, steps: readonly LivenessStep[], r: () => number, swap?: (s: LivenessStep) => LivenessStep): Promise<Buffer[]> {
  const poses: { yaw: number; pitch: number }[] = [];
  for (let i = 0; i < steps.length; i++) {
    const step = swap && i > 0 ? swap(steps[i]!) : steps[i]!;
    const pose = poseFor(step, r);
    // Now and then a frame caught on the way from the previous pose.
    if (i > 0 && r() < 0.3) {
      const prev = poses[poses.length - 1]!;
      poses.push({ yaw: (prev.yaw + pose.yaw) / 2, pitch: (prev.pitch + pose.pitch) / 2 });
    }
    poses.push(pose);
  }
  if (poses.length < 3) poses.push(poseFor('center', r));
  return Promise.all(
    poses.map(async (p) =>
      encodeJpeg(synthView(src.rgb, src.l5, { ...p, yaw: p.yaw + src.yawOffsetDeg, ...capture(r, src.rgb.width) }), Math.round(uniform(r, 82, 94))),
    ),
  );
}

/** What a screen adds to what it shows, filmed by a camera: moiré, gamma, a little blur, a cast. */
export function screen(img: Rgb, r: () => number): Rgb {
  const out = Buffer.alloc(img.data.length);
  const period = uniform(r, 2.5, 4.5);
  const angle = uniform(r, 0, Math.PI);
  const ca = Math.cos(angle),
    sa = Math.sin(angle);
  const { width: w, height: h, data } = img;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = (y * w + x) * 3;
      const moire = 10 * Math.sin(((x * ca + y * sa) * 2 * Math.PI) / period);
      for (let c = 0; c < 3; c++) {
        // A 3-tap horizontal blur, then the display's gamma and a blue-ish cast.
        const l = data[(y * w + Math.max(0, x - 1)) * 3 + c]!,
          m = data[i + c]!,
          rr = data[(y * w + Math.min(w - 1, x + 1)) * 3 + c]!;
        const v = (l + 2 * m + rr) / 4;
        const g = 255 * Math.pow(v / 255, 0.8) + moire + (c === 2 ? 12 : c === 0 ? -6 : 0);
        out[i + c] = Math.max(0, Math.min(255, Math.round(g)));
      }
    }
  }
  return { data: out, width: w, height: h };
}

/**
 * Inter-ocular distance (pixels) a source is brought up to before views are synthesised from it: a
 * front camera's 640-pixel frame of a face at arm's length shows about this much. LFW's 126-pixel
 * tiles (30 to 35 pixels between the eyes) are enlarged (Lanczos) so that the warp's resampling and
 * the landmark model's noise on a tiny face do not stand for what a camera delivers.
 */
const SOURCE_IOD_PX = 80;

export async function loadSource(engine: FaceEngine, file: string): Promise<Source | string> {
  let { jpeg } = await normaliseUpload(readFileSync(path.join(FIXTURES_DIR, file)));
  let face = await engine.liveness(jpeg, 'largest', { quality: false });
  const iod = (l: Pt[]) => Math.hypot(l[1]![0] - l[0]![0], l[1]![1] - l[0]![1]);
  const factor = Math.min(3, SOURCE_IOD_PX / iod(face.face.landmarks5 as Pt[]));
  if (factor > 1.2) {
    const meta = await sharp(jpeg).metadata();
    jpeg = await sharp(jpeg)
      .resize(Math.round(meta.width! * factor), Math.round(meta.height! * factor), { kernel: 'lanczos3' })
      .jpeg({ quality: 95 })
      .toBuffer();
    face = await engine.liveness(jpeg, 'largest', { quality: false });
  }
  const l5 = face.face.landmarks5 as Pt[];
  // A source must face the camera: the views turn it from there.
  const yaw = estimatePose(l5).yaw;
  if (Math.abs(yaw) >= 0.1) return `not frontal (yaw ${yaw.toFixed(2)})`;
  const identity = FIXTURE_PHOTOS.find((p) => p.file === file)?.identity ?? file;
  const rgb = await decodeRgb(jpeg);
  // A person asked to face the camera faces it: the source's own small turn is undone in every view
  // (its reading at 0° and at 20° give the degrees per unit of yaw for this face).
  const turned = await engine.liveness(await encodeJpeg(synthView(rgb, l5, { yaw: 20 }), 95), 'largest', { quality: false });
  const perDegree = (estimatePose(turned.face.landmarks5 as Pt[]).yaw - yaw) / 20;
  const yawOffsetDeg = perDegree > 0.002 ? -yaw / perDegree : 0;
  return { file, identity, rgb, l5, frontalJpeg: jpeg, yawOffsetDeg };
}

/**
 * Screen-to-room illuminance ratio of the synthesised light frames: a phone at full brightness at
 * 30 cm in a room of about 400 lux (docs/face-engine.md "Screen light").
 */
export const SYNTH_LIGHT_K = 0.15;

/** The detector-like box of a face from its five landmarks (for the light model only). */
export function boxFromLandmarks(l5: readonly Pt[]): [number, number, number, number] {
  const iod = Math.hypot(l5[1]![0] - l5[0]![0], l5[1]![1] - l5[0]![1]);
  const cx = (l5[0]![0] + l5[1]![0] + l5[3]![0] + l5[4]![0]) / 4;
  const cy = (l5[0]![1] + l5[1]![1] + l5[3]![1] + l5[4]![1]) / 4;
  return [cx - 1.1 * iod, cy - 1.3 * iod, 2.2 * iod, 2.6 * iod];
}

/** A session's light frames made from the frontal photo: 6 to 8 colours, each frame lit by its colour (`relit`) or not. */
async function lightFrames(src: Source, r: () => number, mode: 'relit' | 'unlit', print = false): Promise<LightFrames> {
  const lights = drawLights(6 + Math.floor(r() * 3), (n) => Math.floor(r() * n));
  const box = boxFromLandmarks(src.l5);
  const frames = await Promise.all(
    lights.map(async (c) => {
      let view = synthView(src.rgb, src.l5, { ...capture(r, src.rgb.width), yaw: src.yawOffsetDeg });
      if (mode === 'relit') view = relight(view, box, c, { k: SYNTH_LIGHT_K });
      if (print) view = flatTilt(view, src.l5, { print: true, noiseSeed: Math.floor(r() * 1e9) });
      return encodeJpeg(view, 88);
    }),
  );
  return { lights, frames };
}

const swapStep = (s: LivenessStep): LivenessStep => (s === 'turn_left' ? 'turn_right' : s === 'turn_right' ? 'look_up' : s === 'look_up' ? 'turn_left' : s);

export async function evaluateLiveness(
  engine: FaceEngine,
  opts: {
    set: keyof typeof SOURCE_SETS;
    perSource: number;
    nearReplay?: boolean;
    /** false: judge without the light check (the light frames are not made). */
    light?: boolean;
    log?: (line: string) => void;
    verbose?: boolean;
    dump?: string;
  },
): Promise<LivenessEvaluation> {
  const seed = opts.set === 'tune' ? 1 : 20261127;
  const r = rng(seed);
  const steps = () => drawSteps((n) => Math.floor(r() * n));
  const received: Received = { digests: new Set<string>(), sketches: [], nearReplay: opts.nearReplay ?? false };
  const sources: Source[] = [];
  const skippedSources: Record<string, string> = {};
  for (const file of SOURCE_SETS[opts.set]) {
    const s = await loadSource(engine, file);
    if (typeof s === 'string') skippedSources[file] = s;
    else sources.push(s);
  }
  const bona: SequenceVerdict[] = [];
  const attacks = Object.fromEntries(ATTACK_TYPES.map((a) => [a, [] as SequenceVerdict[]])) as Record<AttackType, SequenceVerdict[]>;
  let judged = 0;
  const copyBands: Record<string, number[]> = {};
  const judge = async (frames: Buffer[], st: readonly LivenessStep[], what: string, light: LightFrames | null) => {
    const v = await judgeSequence(engine, frames, st, received, opts.light === false ? null : light);
    (copyBands[what] ??= []).push(v.copyBands ?? 0);
    judged++;
    if (opts.verbose && what !== 'bona fide') opts.log?.(`    ${what}: ${v.reason ?? 'passed'} ${v.detail ?? ''}`);
    if (opts.dump && (what === 'bona fide' ? v.status === 'failed' : v.status === 'passed')) {
      mkdirSync(opts.dump, { recursive: true });
      frames.forEach((f, k) =>
        writeFileSync(path.join(opts.dump!, `${String(judged).padStart(4, '0')}-${what.replace(/ /g, '_')}-${v.reason ?? 'passed'}-${k}.jpg`), f),
      );
    }
    return v;
  };
  const recorded: { frames: Buffer[]; steps: LivenessStep[]; light: LightFrames }[] = [];
  for (const [k, src] of sources.entries()) {
    // The intruder of a spliced sequence: the next source showing another person.
    const other = [...sources.slice(k + 1), ...sources.slice(0, k)].find((o) => o.identity !== src.identity);
    if (!other) throw new Error(`the ${opts.set} set needs photos of at least two people`);
    for (let i = 0; i < opts.perSource; i++) {
      const st = steps();
      const frames = await bonaFide(src, st, r);
      const bonaLight = await lightFrames(src, r, 'relit');
      bona.push(await judge(frames, st, 'bona fide', bonaLight));
      recorded.push({ frames, steps: st, light: bonaLight });

      const st2 = steps();
      // One picture (this capture of the photo: its own noise and framing), sent three times.
      const same = await encodeJpeg(synthView(src.rgb, src.l5, capture(r, src.rgb.width)), 90);
      attacks.repeated.push(await judge([same, same, same], st2, 'repeated', await lightFrames(src, r, 'unlit')));

      const jit = await Promise.all(
        [0, 1, 2].map(async () => encodeJpeg(synthView(src.rgb, src.l5, { ...capture(r, src.rgb.width), yaw: 0, pitch: 0 }), Math.round(uniform(r, 60, 92)))),
      );
      attacks.jittered.push(await judge(jit, st2, 'jittered', await lightFrames(src, r, 'unlit')));

      const st3 = steps();
      const tilt = (s: LivenessStep) =>
        s === 'turn_left'
          ? { yaw: uniform(r, 20, 35) }
          : s === 'turn_right'
            ? { yaw: -uniform(r, 20, 35) }
            : s === 'look_up'
              ? { pitch: uniform(r, 15, 25) }
              : {};
      const printed = await Promise.all(
        [...st3, ...(st3.length < 3 ? (['center'] as const) : [])].map(async (s) =>
          encodeJpeg(flatTilt(src.rgb, src.l5, { ...tilt(s), print: true, noiseSeed: Math.floor(r() * 1e9) }), 88),
        ),
      );
      // Paper reflects the screen's light as skin does: the print's light frames follow the colours.
      attacks.print_tilted.push(await judge(printed, st3, 'print_tilted', await lightFrames(src, r, 'relit', true)));

      const st4 = steps();
      const shown = await bonaFide(src, st4, r);
      const filmed = await Promise.all(shown.map(async (f) => encodeJpeg(screen(await decodeRgb(f), r), 88)));
      // A screen emits its own picture: the session's colours barely show on it.
      attacks.screen_replay.push(await judge(filmed, st4, 'screen_replay', await lightFrames(src, r, 'unlit')));

      const st5 = steps();
      const spliced = await bonaFide(src, st5, r);
      const intruder = await bonaFide(other, st5, r);
      const at = 1 + Math.floor(r() * (Math.min(spliced.length, intruder.length) - 1));
      spliced[at] = intruder[at]!;
      attacks.spliced.push(await judge(spliced, st5, 'spliced', await lightFrames(src, r, 'relit')));

      const earlier = recorded[Math.floor(r() * recorded.length)]!;
      // The new session draws its own colours; the recording carries the earlier session's light frames.
      const newLights = (l: LightFrames) => drawLights(l.frames.length, (n) => Math.floor(r() * n));
      attacks.replayed.push(await judge(earlier.frames, steps(), 'replayed', { lights: newLights(earlier.light), frames: earlier.light.frames }));

      const st6 = steps();
      attacks.out_of_order.push(await judge(await bonaFide(src, st6, r, swapStep), st6, 'out_of_order', await lightFrames(src, r, 'relit')));

      const st7 = steps();
      // Re-encoded with a little sensor-like noise: bytes never sent before, pixels of the recording.
      const reencoded = await Promise.all(
        earlier.frames.map(async (f) =>
          encodeJpeg(synthView(await decodeRgb(f), src.l5, { noiseSeed: Math.floor(r() * 1e9), scale: 1 }), Math.round(uniform(r, 80, 95))),
        ),
      );
      const reencodedLight = await Promise.all(
        earlier.light.frames.map(async (f) =>
          encodeJpeg(synthView(await decodeRgb(f), src.l5, { noiseSeed: Math.floor(r() * 1e9), scale: 1 }), Math.round(uniform(r, 80, 95))),
        ),
      );
      attacks.injected_reencoded.push(await judge(reencoded, st7, 'injected_reencoded', { lights: newLights(earlier.light), frames: reencodedLight }));

      // Head turns warped from the one photo, as the bona fide views are made: without a light
      // response (the light frames the photo itself), and with one painted on (a client under the
      // attacker's control can: a known limit, reported, not required to be refused).
      const st8 = steps();
      attacks.photo_warp.push(await judge(await bonaFide(src, st8, r), st8, 'photo_warp', await lightFrames(src, r, 'unlit')));
      const st9 = steps();
      attacks.photo_warp_relit.push(await judge(await bonaFide(src, st9, r), st9, 'photo_warp_relit', await lightFrames(src, r, 'relit')));
      const b = bona[bona.length - 1]!;
      opts.log?.(`  ${src.file} #${i + 1}: bona fide ${b.reason ?? 'passed'}${opts.verbose ? ` ${b.detail}` : ''}`);
    }
  }
  const tally = (vs: SequenceVerdict[]) => {
    const reasons: Record<string, number> = {};
    for (const v of vs) reasons[v.reason ?? 'passed'] = (reasons[v.reason ?? 'passed'] ?? 0) + 1;
    return reasons;
  };
  return {
    set: opts.set,
    nearReplay: received.nearReplay,
    copyBands,
    sources: sources.map((s) => s.file),
    skippedSources,
    bpcer: rate(bona.filter((v) => v.status === 'failed').length, bona.length),
    bonaFideReasons: tally(bona),
    apcer: Object.fromEntries(
      ATTACK_TYPES.map((a) => [a, { ...rate(attacks[a].filter((v) => v.status === 'passed').length, attacks[a].length), reasons: tally(attacks[a]) }]),
    ) as LivenessEvaluation['apcer'],
  };
}

const pct = (x: number) => `${(100 * x).toFixed(1)} %`;

export function printLiveness(e: LivenessEvaluation, print: (line: string) => void = console.log): void {
  print(
    `liveness sessions, ${e.set} set: sources ${e.sources.join(', ')}; near copies ${e.nearReplay ? 'refused' : 'not checked (LIVENESS_NEAR_REPLAY_WINDOW_SECONDS 0)'}`,
  );
  for (const [f, why] of Object.entries(e.skippedSources)) print(`  source skipped: ${f} (${why})`);
  print('attack type           APCER    accepted/presented   95 % bounds        refused as');
  for (const [a, r] of Object.entries(e.apcer)) {
    const reasons = Object.entries(r.reasons)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    print(`${a.padEnd(20)}  ${pct(r.rate).padStart(7)}  ${`${r.errors}/${r.n}`.padStart(10)}          [${pct(r.lower95)}, ${pct(r.upper95)}]   ${reasons}`);
  }
  const rates = Object.values(e.apcer).map((r) => r.rate);
  const worst = rates.length ? Math.max(...rates) : NaN;
  // The most sketch bands one frame shares with a frame of an earlier session (NEAR_COPY_FRAME_BANDS and up: a near copy).
  const hist = (xs: number[]) =>
    Array.from({ length: SKETCH_BANDS + 1 }, (_, k) => xs.filter((x) => x === k).length)
      .map((n, k) => (n ? `${k}:${n}` : ''))
      .filter(Boolean)
      .join(' ');
  print(`sketch bands one frame shares with an earlier session's (near copy at ${NEAR_COPY_FRAME_BANDS}+ of ${SKETCH_BANDS}), bands:sequences`);
  for (const [k, xs] of Object.entries(e.copyBands)) if (k !== 'replayed') print(`  ${k.padEnd(20)} ${hist(xs)}`);
  print(`APCER (worst attack type) ${pct(worst)}`);
  const reasons = Object.entries(e.bonaFideReasons)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  print(
    `${e.set === 'recorded' ? '' : 'synthesised bona fide (warps of one photo: a logic check, not a BPCER of real people) '}BPCER ${pct(e.bpcer.rate)} (${e.bpcer.errors}/${e.bpcer.n} bona fide sequences refused), 95 % bounds [${pct(e.bpcer.lower95)}, ${pct(e.bpcer.upper95)}]; ${reasons}`,
  );
}
