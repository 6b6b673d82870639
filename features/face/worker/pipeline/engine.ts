/**
 * The face engine: the four ONNX models behind two calls that match the two queue stages.
 *
 * - `liveness(jpeg, mode)`: decode, detect, choose the face, 68 landmarks -> 5 points, anti-spoof
 *   score, capture quality (quality.ts). Throws FaceError `invalid_image`, `no_face` or (mode
 *   'single') `multiple_faces`.
 * - `embed(jpeg, landmarks5)`: 5-point similarity alignment to the ArcFace 112x112 template and the
 *   512-d L2-normalised embedding; or `embedAligned(aligned)` on the face `liveness(..., { align:
 *   true })` already aligned from the pixels it decoded (the face worker's path: one decode).
 *
 * Both take the normalised JPEG (see decode.ts `normaliseUpload`); each reports its own wall-clock
 * milliseconds. Sessions are created once, in `load`. Pure library: no queue, no HTTP, no config.
 * See docs/face-engine.md for every number used here and how the thresholds were chosen.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { EMBEDDING_DIM } from '../../../../platform/face/embeddings.js';
import { decodeRgb, type RgbImage } from '../../../../platform/face/image.js';
import { FaceError } from '../../../../platform/face/face-error.js';
import type { FaceMode, LivenessResult } from '../../../../platform/face/liveness.js';
import { detectFaces, DEFAULT_DETECT_OPTIONS, DETECT_INPUT_HEIGHT, DETECT_INPUT_WIDTH, type Detection, type DetectOptions } from './detect.js';
import { fivePoints, predictLandmarks, squareBox, LANDMARK_INPUT_SIZE } from './landmarks.js';
import { scoreLiveness, LIVENESS_INPUT_SIZE } from './liveness.js';
import { embedAligned, embedFace } from './embed.js';
import { alignFace, ALIGNED_SIZE, type Point } from './align.js';
import { FACE_ENGINE_VERSION, FACE_MODELS, type FaceModelRole } from '../../../../platform/face/face-models.js';
import { assessQuality, assessWholeImage } from './quality.js';
import { flushDenormalWeights } from './denormals.js';

/** The loaded model of each role (files and SHA-256 pins: platform/face/face-models.ts). */
type Sessions = Record<FaceModelRole, ort.InferenceSession>;

/**
 * When a photo counts as showing several faces in mode 'single' (1:1 flows). Every detection at or
 * above the detector threshold (0.7) is a face and is counted in `faceCount`; the photo is refused
 * only when a second face is *clearly* present: detector probability >= 0.9 AND box height at least
 * 40% of the largest face's. A small or uncertain face in the background (a bystander, a face on a
 * poster or a T-shirt) does not block a selfie; two people side by side do.
 */
export const FACE_SELECTION = {
  secondFaceMinScore: 0.9,
  secondFaceMinSizeRatio: 0.4,
} as const;

/**
 * Optional per-step clock (profiling): called with each step's name and wall milliseconds inside a
 * stage (decode, detect, landmarks, antispoof, align, embedModel). Costs nothing when absent.
 */
export type StepClock = (step: string, ms: number) => void;

/** What `liveness` returns: the stage's result and, with `align: true`, the aligned face. */
export interface EngineLivenessResult extends LivenessResult {
  /**
   * With `align: true`: the chosen face aligned to the ArcFace 112x112 template (interleaved RGB,
   * float 0..255), what `embedAligned` takes, so that the embed stage needs neither the image nor a
   * second decode.
   */
  aligned?: Float32Array;
}

export interface LivenessOptions {
  /** Also align the chosen face for `embedAligned` (the decoded image is at hand here). */
  align?: boolean;
  /**
   * Called with the aligned face (as `aligned` above) as soon as it exists, before the anti-spoof
   * model runs: the face worker starts handing the face on to an embed job here and awaits that at
   * the end of its stage (docs/performance.md §4 "Stages that follow on"). What it returns is awaited
   * before the anti-spoof model: the hand-off's commands written, not answered.
   */
  onAligned?: (aligned: Float32Array) => void | Promise<void>;
  /** Assess capture quality (quality.ts); on unless false (the benchmark measures without). */
  quality?: boolean;
  /** Run the anti-spoof model; on unless false (a light frame: its score is then 0, never a pass). */
  antiSpoof?: boolean;
  clock?: StepClock;
}

/** One face of `analyse`: the liveness-stage fields plus the embedding. */
export interface FaceAnalysis {
  box: [number, number, number, number];
  detScore: number;
  landmarks5: number[][];
  livenessScore: number;
  embedding: number[];
}

export interface EmbedResult {
  /** 512 numbers, L2 norm 1: cosine similarity = dot product. */
  embedding: number[];
  ms: number;
}

export interface FaceEngineOptions {
  /** onnxruntime intra-op threads per session (default 1: fastest per process on 2 cores, see docs). */
  intraOpThreads?: number;
  /** Check each model file against its SHA-256 pin (platform/face/face-models.ts) before loading (default true). */
  verifyModels?: boolean;
  /** onnxruntime execution providers, in order of preference (default ['cpu']). */
  executionProviders?: string[];
}

/**
 * onnxruntime graph optimisation per model: `all` (layout transforms, more fusions) for every model,
 * their denormal weights flushed to zero at load (denormals.ts). SPEC 5: with its denormal weights,
 * fr_feature.onnx (the embedder) runs about 3x slower under `all` than `extended` on CPUs with a
 * denormal penalty; flushed, `all` runs it 24 % faster than `extended` on this machine (13.4 -> 10.2 ms
 * p50 over the fixture faces), embeddings within 2.2e-7. For fr_detect and fr_landmark `all` is 2.3x
 * and 3.8x faster than `extended`, outputs equal within 5e-7 (docs/face-engine.md, docs/performance.md
 * §4); the fixture outcomes are unchanged (test/face/face-outcomes.test.ts).
 */
export const GRAPH_OPTIMIZATION: Record<FaceModelRole, 'extended' | 'all'> = {
  detect: 'all',
  landmark: 'all',
  liveness: 'all',
  embed: 'all',
};

function round(v: number, digits: number): number {
  const k = 10 ** digits;
  return Math.round(v * k) / k;
}

function elapsed(t0: number): number {
  return round(performance.now() - t0, 1);
}

/** Choose the face; throws no_face / multiple_faces. Exported for tests. */
export function chooseFace(dets: readonly Detection[], mode: FaceMode): Detection {
  if (dets.length === 0) throw new FaceError('no_face', undefined, { faceCount: 0 });
  const height = (d: Detection) => d.y2 - d.y1;
  const bySize = [...dets].sort((a, b) => height(b) - height(a) || b.score - a.score);
  const largest = bySize[0]!;
  if (mode === 'single') {
    const rival = bySize
      .slice(1)
      .find((d) => d.score >= FACE_SELECTION.secondFaceMinScore && height(d) >= FACE_SELECTION.secondFaceMinSizeRatio * height(largest));
    if (rival) {
      throw new FaceError('multiple_faces', `${dets.length} faces detected; more than one is clearly present`, {
        faceCount: dets.length,
      });
    }
  }
  return largest;
}

function parseLandmarks5(landmarks5: unknown): Point[] {
  if (!Array.isArray(landmarks5) || landmarks5.length !== 5) {
    throw new TypeError('landmarks5 must be an array of five [x, y] points');
  }
  return landmarks5.map((p) => {
    if (!Array.isArray(p) || p.length !== 2 || !p.every((v) => typeof v === 'number' && Number.isFinite(v))) {
      throw new TypeError('landmarks5 must be an array of five [x, y] points of finite numbers');
    }
    return [p[0] as number, p[1] as number];
  });
}

/** One light frame of `lightFrames`: its face, or the detector's outcome. */
export type LightFrame =
  { ok: true; face: LivenessResult['face']; tracked: boolean; faceCount: number | null } | { ok: false; code: FaceError['code']; faceCount: number };

/**
 * How far a followed face may go between two light frames before it counts as lost (the detector then
 * runs): its five points' scale within these factors of the previous frame's, their centre moved by at
 * most `maxShift` of the box's height, and its eye line turned by at most `maxTurn` radians. A person
 * holding still in front of a screen for under half a second moves far less; the landmark model placed
 * on something that is not the face (or on a face that left the box) answers points that break one of them.
 */
export const TRACK_LIMITS = { minScale: 0.8, maxScale: 1.25, maxShift: 0.25, maxTurn: 0.35 } as const;

/**
 * A light frame's detector skips its padded pass when the plain pass found a face between a tenth and
 * 0.6 of the canvas height, well inside the frame (detect.ts `WellInside`; the capture path's lower
 * bound is a quarter). The padded pass is there for a face too large for the plain one; what the
 * lower bound guards against, a second, larger face beside the one found, is not what a light frame
 * is judged on (its face is the one followed from frame to frame, bound to the session's by its grid),
 * and at the console's 480 px a face at arm's length is a fifth to a half of the frame: this saves
 * the second detector run on most light jobs.
 */
export const LIGHT_WELL_INSIDE = { minHeight: 0.1, maxHeight: 0.6, margin: 0.1 } as const;

/** A followed face's box moved by more than this share of its height: its landmarks are found again on the moved box. */
export const TRACK_REFINE = 0.05;

const centreOf = (p: readonly Point[]): Point => [p.reduce((a, q) => a + q[0], 0) / p.length, p.reduce((a, q) => a + q[1], 0) / p.length];
const spreadOf = (p: readonly Point[], c: Point) => Math.sqrt(p.reduce((a, q) => a + (q[0] - c[0]) ** 2 + (q[1] - c[1]) ** 2, 0) / p.length);
const eyeAngle = (p: readonly Point[]) => Math.atan2(p[1]![1] - p[0]![1], p[1]![0] - p[0]![0]);

/** The previous box moved and scaled as its face's five points moved to `now`, or null when that is beyond TRACK_LIMITS. */
function movedBox(box: Detection, before: readonly Point[], now: readonly Point[]): Detection | null {
  const c0 = centreOf(before),
    c1 = centreOf(now);
  const s = spreadOf(now, c1) / (spreadOf(before, c0) || 1);
  const h = box.y2 - box.y1;
  const shift = Math.hypot(c1[0] - c0[0], c1[1] - c0[1]) / (h || 1);
  const turn = Math.abs(Math.atan2(Math.sin(eyeAngle(now) - eyeAngle(before)), Math.cos(eyeAngle(now) - eyeAngle(before))));
  if (!(s >= TRACK_LIMITS.minScale && s <= TRACK_LIMITS.maxScale && shift <= TRACK_LIMITS.maxShift && turn <= TRACK_LIMITS.maxTurn)) return null;
  const at = (x: number, y: number): Point => [c1[0] + (x - c0[0]) * s, c1[1] + (y - c0[1]) * s];
  const [x1, y1] = at(box.x1, box.y1);
  const [x2, y2] = at(box.x2, box.y2);
  return { ...box, x1, y1, x2, y2 };
}

/** A face as the liveness stage describes it: the box clipped to the image, the five points rounded. */
function describedFace(img: RgbImage, d: Detection, points: readonly Point[]): LivenessResult['face'] {
  const x1 = Math.max(0, d.x1),
    y1 = Math.max(0, d.y1);
  const x2 = Math.min(img.width, d.x2),
    y2 = Math.min(img.height, d.y2);
  return {
    box: [round(x1, 1), round(y1, 1), round(x2 - x1, 1), round(y2 - y1, 1)],
    detScore: round(d.score, 4),
    landmarks5: points.map(([x, y]): [number, number] => [round(x, 2), round(y, 2)]),
  };
}

export class FaceEngine {
  private constructor(
    private readonly sessions: Sessions,
    readonly detectOptions: DetectOptions,
    readonly intraOpThreads: number,
  ) {}

  /** Load the four models (file names: platform/face/face-models.ts) from `modelDir`, once per process. */
  static async load(modelDir: string, opts: FaceEngineOptions = {}): Promise<FaceEngine> {
    const threads = opts.intraOpThreads ?? 1;
    if (!Number.isInteger(threads) || threads < 1) throw new RangeError('intraOpThreads must be a positive integer');
    const sessionOptions = (role: FaceModelRole): ort.InferenceSession.SessionOptions => ({
      executionProviders: opts.executionProviders ?? ['cpu'],
      graphOptimizationLevel: GRAPH_OPTIMIZATION[role],
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
    });
    const entries = await Promise.all(
      FACE_MODELS.map(async ({ role, file, sha256 }) => {
        const path = join(modelDir, file);
        let bytes: Buffer;
        try {
          bytes = await readFile(path);
        } catch (err) {
          throw new Error(`face model ${file} not found in ${modelDir} (run: npx tsx scripts/fetch-models.ts)`, { cause: err });
        }
        if (opts.verifyModels !== false) {
          const actual = createHash('sha256').update(bytes).digest('hex');
          if (actual !== sha256) throw new Error(`face model ${file}: SHA-256 ${actual}, expected ${sha256}`);
        }
        // After the pin check: the bytes onnxruntime gets, not the file, lose their denormal weights.
        flushDenormalWeights(bytes);
        const session = await ort.InferenceSession.create(bytes, sessionOptions(role));
        return [role, session] as const;
      }),
    );
    const engine = new FaceEngine(Object.fromEntries(entries) as Sessions, DEFAULT_DETECT_OPTIONS, threads);
    await engine.warmUp();
    return engine;
  }

  /**
   * One run of each model on a blank input, so that the first request does not pay for set-up; and
   * the detector's whole step (letterbox resampling, planar conversion, the loop over its priors,
   * NMS: JavaScript, which V8 optimises only after a few calls) a few times on a textured image with
   * no face, so that both passes run: without it the first capture's detector step cost about 40 ms
   * more CPU than the next ones (docs/performance.md, "The detector inside the service").
   */
  private async warmUp(): Promise<void> {
    const zeros = (shape: number[]) => new ort.Tensor('float32', new Float32Array(shape.reduce((a, b) => a * b, 1)), shape);
    await this.sessions.detect.run({ input: zeros([1, 3, DETECT_INPUT_HEIGHT, DETECT_INPUT_WIDTH]) });
    const textured: RgbImage = { width: 480, height: 360, data: new Uint8Array(480 * 360 * 3) };
    for (let i = 0; i < textured.data.length; i++) textured.data[i] = (i * 7919) % 251;
    for (let i = 0; i < 3; i++) await detectFaces(this.sessions.detect, textured, this.detectOptions);
    await this.sessions.landmark.run({ input: zeros([1, 1, LANDMARK_INPUT_SIZE, LANDMARK_INPUT_SIZE]) });
    await this.sessions.liveness.run({ input: zeros([1, 3, LIVENESS_INPUT_SIZE, LIVENESS_INPUT_SIZE]) });
    await this.sessions.embed.run({ input: zeros([1, 3, ALIGNED_SIZE, ALIGNED_SIZE]) });
  }

  /** What is loaded, for the face process's GET /version. */
  get version(): { engine: string; models: Record<string, string>; intraOpThreads: number } {
    const models = Object.fromEntries(FACE_MODELS.map((m) => [m.name, `${m.file}@sha256:${m.sha256}`]));
    return { engine: FACE_ENGINE_VERSION, models, intraOpThreads: this.intraOpThreads };
  }

  /**
   * Landmarks and anti-spoof score of one detected face. `afterLandmarks` runs between the two (the
   * face's box and 5 points are known, its anti-spoof score not yet).
   */
  private async describe(
    img: RgbImage,
    face: Detection,
    clock?: StepClock,
    afterLandmarks?: (face: LivenessResult['face']) => Promise<void>,
    antiSpoof = true,
  ): Promise<{ face: LivenessResult['face']; livenessScore: number; points68: Point[] }> {
    const square = squareBox(face);
    let t = performance.now();
    const { points68 } = await predictLandmarks(this.sessions.landmark, img, square);
    const landmarks5 = fivePoints(points68).map(([x, y]): [number, number] => [round(x, 2), round(y, 2)]);
    clock?.('landmarks', performance.now() - t);
    const x1 = Math.max(0, face.x1),
      y1 = Math.max(0, face.y1);
    const x2 = Math.min(img.width, face.x2),
      y2 = Math.min(img.height, face.y2);
    const described: LivenessResult['face'] = {
      box: [round(x1, 1), round(y1, 1), round(x2 - x1, 1), round(y2 - y1, 1)],
      detScore: round(face.score, 4),
      landmarks5,
    };
    await afterLandmarks?.(described);
    if (!antiSpoof) return { face: described, livenessScore: 0, points68 };
    t = performance.now();
    const live = await scoreLiveness(this.sessions.liveness, img, square);
    clock?.('antispoof', performance.now() - t);
    return { face: described, livenessScore: round(live.live, 4), points68 };
  }

  /**
   * Liveness stage: decode, detect, choose the face ('single': refuse several clear faces;
   * 'largest': take the largest), landmarks, anti-spoof score.
   */
  async liveness(jpeg: Buffer, mode: FaceMode, opts: LivenessOptions = {}): Promise<EngineLivenessResult> {
    if (mode !== 'single' && mode !== 'largest') throw new TypeError(`unknown face mode: ${String(mode)}`);
    const { clock } = opts;
    const t0 = performance.now();
    const img = await decodeRgb(jpeg);
    let t = performance.now();
    clock?.('decode', t - t0);
    const dets = await detectFaces(this.sessions.detect, img, this.detectOptions);
    clock?.('detect', performance.now() - t);
    // No face: the advice the photo as a whole allows (too dark, too bright, too blurred to find one).
    if (dets.length === 0 && opts.quality !== false) throw new FaceError('no_face', undefined, { faceCount: 0, quality: assessWholeImage(img) });
    const chosen = chooseFace(dets, mode);
    // The face is aligned as soon as its landmarks are known, before the anti-spoof model: a caller
    // that hands it on (`onAligned`) lets the embed stage start while this one finishes.
    let aligned: Float32Array | undefined;
    const align =
      opts.align || opts.onAligned
        ? async (f: LivenessResult['face']) => {
            const ta = performance.now();
            // The same points `embed` would parse: the rounded landmarks5 of the result.
            aligned = alignFace(img, parseLandmarks5(f.landmarks5)).rgb;
            clock?.('align', performance.now() - ta);
            await opts.onAligned?.(aligned);
          }
        : undefined;
    const { face, livenessScore, points68 } = await this.describe(img, chosen, clock, align, opts.antiSpoof !== false);
    const result: EngineLivenessResult = { face, livenessScore, faceCount: dets.length, ms: 0 };
    // Quality from what this stage already holds (pixels, 68 landmarks); on by default.
    if (opts.quality !== false) {
      t = performance.now();
      result.quality = assessQuality({ img, points68, landmarks5: face.landmarks5 as Point[] });
      result.qualityMs = performance.now() - t;
      clock?.('quality', result.qualityMs);
    }
    if (opts.align) result.aligned = aligned;
    result.ms = elapsed(t0);
    return result;
  }

  /**
   * A liveness session's light frames, in order (platform/jobs/light.ts): each decoded; the detector
   * on the first frame (mode 'single') and wherever no face is being followed; on the others the
   * landmark model on the previous frame's box, the box moved and scaled with the five points (and the
   * landmarks once more on the moved box when it moved by more than TRACK_REFINE). A followed face that moved or changed size more than a
   * person between two light frames does (TRACK_LIMITS) is lost: the detector runs on that frame. The
   * face of every frame that has one is aligned and embedded (`embed`; the embedder takes one face a
   * run, its input has a batch of 1: one run per frame). No anti-spoof model, no quality. A frame whose
   * detector finds no face, or several clear ones, is that outcome; the next frame is detected again.
   */
  async lightFrames(
    images: readonly (Buffer | RgbImage)[],
    embed: boolean,
    clock?: StepClock,
  ): Promise<{ frames: LightFrame[]; embeddings: (number[] | null)[]; pixels: RgbImage[] }> {
    const frames: LightFrame[] = [];
    // Each frame's pixels, for the caller's own measures on them (the light job's grid and colour sample).
    const pixels: RgbImage[] = [];
    // Each frame's face embedding, null where the frame has no face (or `embed` is false).
    const embeddings: (number[] | null)[] = [];
    let previous: { box: Detection; points: Point[] } | null = null;
    // Pixels as given (the API decoded them); JPEGs all decoded at once (libvips' threads), while the first is being searched.
    const t0 = performance.now();
    const decoded = images.map((img) => (Buffer.isBuffer(img) ? decodeRgb(img) : Promise.resolve(img)));
    for (const d of decoded) d.catch(() => {}); // each awaited in turn below
    await Promise.allSettled(decoded.slice(0, 1));
    clock?.('decode', performance.now() - t0);
    for (const [i, pending] of decoded.entries()) {
      let t = performance.now();
      const img = await pending;
      pixels.push(img);
      if (i > 0) clock?.('decode', performance.now() - t);
      let found: { box: Detection; points: Point[]; tracked: boolean; faceCount: number | null } | null = null;
      if (previous) {
        t = performance.now();
        const followed = await this.follow(img, previous);
        clock?.('track', performance.now() - t);
        if (followed) found = { ...followed, tracked: true, faceCount: null };
      }
      if (!found) {
        t = performance.now();
        const dets = await detectFaces(this.sessions.detect, img, { ...this.detectOptions, skipPaddedWhenInside: LIGHT_WELL_INSIDE });
        clock?.('detect', performance.now() - t);
        let chosen: Detection;
        try {
          chosen = chooseFace(dets, 'single');
        } catch (e) {
          if (!(e instanceof FaceError)) throw e;
          frames.push({ ok: false, code: e.code, faceCount: dets.length });
          embeddings.push(null);
          previous = null;
          continue;
        }
        t = performance.now();
        const { points68 } = await predictLandmarks(this.sessions.landmark, img, squareBox(chosen));
        clock?.('landmarks', performance.now() - t);
        found = { box: chosen, points: fivePoints(points68), tracked: false, faceCount: dets.length };
      }
      const face = describedFace(img, found.box, found.points);
      frames.push({ ok: true, face, tracked: found.tracked, faceCount: found.faceCount });
      previous = { box: found.box, points: found.points };
      if (embed) {
        t = performance.now();
        const aligned = alignFace(img, parseLandmarks5(face.landmarks5)).rgb;
        clock?.('align', performance.now() - t);
        embeddings.push((await this.embedAligned(aligned, clock)).embedding);
      } else embeddings.push(null);
    }
    return { frames, embeddings, pixels };
  }

  /**
   * The previous frame's face followed into `img`: the landmarks on its box, and once more on the
   * moved box when the face moved or changed size by more than TRACK_REFINE of it (the landmark model
   * is most exact on the crop it expects); null when lost.
   */
  private async follow(img: RgbImage, previous: { box: Detection; points: Point[] }): Promise<{ box: Detection; points: Point[] } | null> {
    const first = fivePoints((await predictLandmarks(this.sessions.landmark, img, squareBox(previous.box))).points68);
    const moved = movedBox(previous.box, previous.points, first);
    if (!moved) return null;
    const h = previous.box.y2 - previous.box.y1 || 1;
    const drift =
      Math.max(
        Math.abs(moved.x1 - previous.box.x1),
        Math.abs(moved.y1 - previous.box.y1),
        Math.abs(moved.x2 - previous.box.x2),
        Math.abs(moved.y2 - previous.box.y2),
      ) / h;
    if (drift <= TRACK_REFINE) return { box: moved, points: first };
    const points = fivePoints((await predictLandmarks(this.sessions.landmark, img, squareBox(moved))).points68);
    const box = movedBox(previous.box, previous.points, points);
    return box ? { box, points } : null;
  }

  /** Embed stage on a face `liveness` already aligned (`align: true`): MobileFaceNet only. */
  async embedAligned(aligned: Float32Array, clock?: StepClock): Promise<EmbedResult> {
    if (aligned.length !== ALIGNED_SIZE * ALIGNED_SIZE * 3) throw new RangeError('aligned face must be 112x112x3');
    const t0 = performance.now();
    const v = await embedAligned(this.sessions.embed, aligned);
    clock?.('embedModel', performance.now() - t0);
    return { embedding: Array.from(v), ms: elapsed(t0) };
  }

  /** Embed stage: align the face given by `landmarks5` (from `liveness`) and embed it. */
  async embed(jpeg: Buffer, landmarks5: number[][], clock?: StepClock): Promise<EmbedResult> {
    const points = parseLandmarks5(landmarks5);
    const t0 = performance.now();
    const img = await decodeRgb(jpeg);
    clock?.('decode', performance.now() - t0);
    const t = performance.now();
    const v = await embedFace(this.sessions.embed, img, points);
    clock?.('alignAndEmbed', performance.now() - t);
    if (v.length !== EMBEDDING_DIM) throw new Error('unexpected embedding size');
    return { embedding: Array.from(v), ms: elapsed(t0) };
  }

  /**
   * Every detected face with its landmarks, liveness score and embedding, largest first (the
   * same computations as `liveness` + `embed`). For calibration and diagnostics, not for the
   * request path.
   */
  async analyse(jpeg: Buffer): Promise<{ width: number; height: number; faces: FaceAnalysis[] }> {
    const img = await decodeRgb(jpeg);
    const dets = await detectFaces(this.sessions.detect, img, this.detectOptions);
    const bySize = [...dets].sort((a, b) => b.y2 - b.y1 - (a.y2 - a.y1) || b.score - a.score);
    const faces: FaceAnalysis[] = [];
    for (const d of bySize) {
      const { face, livenessScore } = await this.describe(img, d);
      const v = await embedFace(this.sessions.embed, img, parseLandmarks5(face.landmarks5));
      faces.push({ ...face, livenessScore, embedding: Array.from(v) });
    }
    return { width: img.width, height: img.height, faces };
  }

  /** Release the ONNX sessions (the engine is unusable afterwards). */
  async release(): Promise<void> {
    await Promise.all(Object.values(this.sessions).map((s) => s.release()));
  }
}
