/**
 * Face detection with the UltraFace-style detector `fr_detect.onnx` (Linzaer's "Ultra-Light-Fast-
 * Generic-Face-Detector", 320x240 variant).
 *
 * Model contract (read from the ONNX graph and faceplugin's fr_detect.js):
 * - input `input` 1x3x240x320, RGB, (v - 127) / 128;
 * - outputs `scores` 1x4420x2 (softmax already applied, column 1 = face) and `boxes` 1x4420x4.
 *   The SSD box decoding against the 4420 priors is inside the graph (it contains the Exp and the
 *   prior constants): `boxes` are already corner-form (x1, y1, x2, y2) normalised to the input. The
 *   priors are generated below all the same, to document the layout and so that a test can check
 *   that the model's boxes sit on them (an undecoded output would not).
 *
 * Close-ups: the detector was trained on faces up to ~256 px in a 320x240 frame and misses a face that
 * fills most of the frame (SPEC 5: the LFW tiles, most selfies). Two measures: the image keeps its
 * aspect ratio (letterboxed on a 4:3 neutral grey canvas; the package stretches it to 320x240, which
 * loses 4 of the 8 LFW tiles), and detection runs twice, on the letterboxed image and on the image
 * centred in a grey canvas twice its size; the results are mapped back to image coordinates and merged.
 */
import * as ort from 'onnxruntime-node';
import type { RgbImage } from '../../../../platform/face/image.js';
import { cropResize, toPlanar } from './align.js';

export const DETECT_INPUT_WIDTH = 320;
export const DETECT_INPUT_HEIGHT = 240;
export const DETECT_MEAN = 127;
export const DETECT_STD = 128;

/** Prior (anchor) layout of the 320x240 model. */
export const PRIOR_MIN_SIZES: readonly (readonly number[])[] = [
  [10, 16, 24],
  [32, 48],
  [64, 96],
  [128, 192, 256],
];
export const PRIOR_STEPS: readonly number[] = [8, 16, 32, 64];
export const PRIOR_COUNT = 4420;

export interface DetectOptions {
  /** Minimum face probability for a detection (Linzaer's demo uses 0.7, faceplugin's JS 0.65). */
  scoreThreshold: number;
  /** IoU above which the lower-scored of two boxes is suppressed. */
  nmsIou: number;
  /** Across passes: also suppress a box when this share of the smaller box lies inside the other. */
  containment: number;
  /**
   * Canvas size relative to the 4:3 letterbox of the image for each pass: 1 = the image itself
   * (letterboxed), 2 = the image centred in a canvas twice its size.
   */
  passes: readonly number[];
  /** Grey level of the letterbox / padding border (127 = 0 after normalisation). */
  borderGrey: number;
  /**
   * Skip the later (padded) passes when the first pass already found a face well inside the frame
   * (see `wellInside`); null = always run every pass.
   */
  skipPaddedWhenInside: WellInside | null;
}

/**
 * "A face well inside the frame" after the first pass: the largest face's box is between
 * `minHeight` and `maxHeight` of the detector canvas height (so it is well within the anchors, 10 to
 * 256 px of 240: the padded pass exists only for faces too large for them), and lies inside the image
 * with a margin of `margin` x its own size on every side (not a close-up cut by the frame edge).
 * The lower bound keeps the rule safe: a face too large for the first pass would have to fill more
 * than the whole frame height beside a face of a quarter of that height, fully visible.
 */
export interface WellInside {
  minHeight: number;
  maxHeight: number;
  margin: number;
}

export const DEFAULT_DETECT_OPTIONS: DetectOptions = {
  scoreThreshold: 0.7,
  nmsIou: 0.4,
  containment: 0.7,
  passes: [1, 2],
  borderGrey: 127,
  skipPaddedWhenInside: { minHeight: 0.25, maxHeight: 0.6, margin: 0.1 },
};

/** A face box in continuous image coordinates (x1, y1, x2, y2) with the detector's probability. */
export interface Detection {
  x1: number;
  y1: number;
  x2: number;
  y2: number;
  score: number;
  /** Index into `passes` of the pass that produced the kept box. */
  pass: number;
}

/** Priors as (cx, cy, w, h) normalised to the input, in the model's output order. */
export function generatePriors(width = DETECT_INPUT_WIDTH, height = DETECT_INPUT_HEIGHT): Float32Array {
  const out: number[] = [];
  PRIOR_STEPS.forEach((step, k) => {
    const fw = Math.ceil(width / step);
    const fh = Math.ceil(height / step);
    for (let j = 0; j < fh; j++) {
      for (let i = 0; i < fw; i++) {
        const cx = ((i + 0.5) * step) / width;
        const cy = ((j + 0.5) * step) / height;
        for (const m of PRIOR_MIN_SIZES[k]!) {
          out.push(clamp01(cx), clamp01(cy), clamp01(m / width), clamp01(m / height));
        }
      }
    }
  });
  return Float32Array.from(out);
}

function clamp01(v: number): number {
  return v < 0 ? 0 : v > 1 ? 1 : v;
}

export function area(d: { x1: number; y1: number; x2: number; y2: number }): number {
  return Math.max(0, d.x2 - d.x1) * Math.max(0, d.y2 - d.y1);
}

function intersection(a: Detection, b: Detection): number {
  const w = Math.min(a.x2, b.x2) - Math.max(a.x1, b.x1);
  const h = Math.min(a.y2, b.y2) - Math.max(a.y1, b.y1);
  return w > 0 && h > 0 ? w * h : 0;
}

export function iou(a: Detection, b: Detection): number {
  const inter = intersection(a, b);
  const union = area(a) + area(b) - inter;
  return union > 0 ? inter / union : 0;
}

/**
 * Greedy non-maximum suppression by score. With `containment` < 1, a box is also suppressed when
 * that share of the smaller of the two boxes lies inside the other (a face box nested in a face box
 * is the same face seen at another scale, not a second face).
 */
export function nms(dets: readonly Detection[], iouThreshold: number, containment = 1): Detection[] {
  const sorted = [...dets].sort((p, q) => q.score - p.score);
  const kept: Detection[] = [];
  for (const d of sorted) {
    let keep = true;
    for (const k of kept) {
      const inter = intersection(d, k);
      if (inter <= 0) continue;
      const union = area(d) + area(k) - inter;
      if (inter / union > iouThreshold || inter / Math.min(area(d), area(k)) > containment) {
        keep = false;
        break;
      }
    }
    if (keep) kept.push(d);
  }
  return kept;
}

/** Geometry of one pass: input pixel -> image coordinate is x = u * k + ox, y = v * k + oy. */
interface PassGeometry {
  k: number;
  ox: number;
  oy: number;
}

export function passGeometry(width: number, height: number, pad: number): PassGeometry {
  const canvasW = Math.max(width, (height * DETECT_INPUT_WIDTH) / DETECT_INPUT_HEIGHT) * pad;
  const canvasH = (canvasW * DETECT_INPUT_HEIGHT) / DETECT_INPUT_WIDTH;
  const k = canvasW / DETECT_INPUT_WIDTH;
  return { k, ox: -(canvasW - width) / 2, oy: -(canvasH - height) / 2 };
}

/**
 * The detector's input buffers (640x640x3 floats, 4.9 MB each), reused instead of allocated per pass
 * (see align.ts `rowScratch`): the letterboxed image, filled and consumed synchronously, and the planar
 * input tensors, each held by one pass until its model run has finished (a process may run passes of
 * several jobs at once, so these are a pool, not one buffer).
 */
const letterboxScratch = new Float32Array(DETECT_INPUT_WIDTH * DETECT_INPUT_HEIGHT * 3);
const inputPool: Float32Array[] = [];

/** Run one pass of the detector; boxes are returned in image coordinates, after per-pass NMS. */
export async function detectPass(session: ort.InferenceSession, img: RgbImage, pad: number, opts: DetectOptions, passIndex = 0): Promise<Detection[]> {
  const g = passGeometry(img.width, img.height, pad);
  const canvas = { x: g.ox, y: g.oy, w: DETECT_INPUT_WIDTH * g.k, h: DETECT_INPUT_HEIGHT * g.k };
  const rgb = cropResize(img, canvas, DETECT_INPUT_WIDTH, DETECT_INPUT_HEIGHT, { border: { fill: opts.borderGrey }, antialias: true }, letterboxScratch);
  const planar = inputPool.pop() ?? new Float32Array(DETECT_INPUT_WIDTH * DETECT_INPUT_HEIGHT * 3);
  const input = new ort.Tensor('float32', toPlanar(rgb, DETECT_INPUT_WIDTH, DETECT_INPUT_HEIGHT, DETECT_MEAN, DETECT_STD, planar), [
    1,
    3,
    DETECT_INPUT_HEIGHT,
    DETECT_INPUT_WIDTH,
  ]);
  let out: ort.InferenceSession.OnnxValueMapType;
  try {
    out = await session.run({ input });
  } finally {
    inputPool.push(planar);
  }
  const scores = out['scores']!.data as Float32Array;
  const boxes = out['boxes']!.data as Float32Array;
  const n = scores.length / 2;
  if (n !== PRIOR_COUNT || boxes.length !== n * 4) {
    throw new Error(`detector output has ${n} priors, expected ${PRIOR_COUNT}`);
  }
  const sx = DETECT_INPUT_WIDTH * g.k;
  const sy = DETECT_INPUT_HEIGHT * g.k;
  const dets: Detection[] = [];
  for (let i = 0; i < n; i++) {
    const score = scores[2 * i + 1]!;
    if (!(score >= opts.scoreThreshold)) continue;
    const x1 = boxes[4 * i]! * sx + g.ox;
    const y1 = boxes[4 * i + 1]! * sy + g.oy;
    const x2 = boxes[4 * i + 2]! * sx + g.ox;
    const y2 = boxes[4 * i + 3]! * sy + g.oy;
    if (!(x2 > x1 && y2 > y1)) continue;
    dets.push({ x1, y1, x2, y2, score, pass: passIndex });
  }
  return nms(dets, opts.nmsIou);
}

/** Whether the largest face of the first pass is well inside the frame (see `WellInside`). */
export function wellInside(dets: readonly Detection[], img: { width: number; height: number }, pad: number, rule: WellInside): boolean {
  if (dets.length === 0) return false;
  const largest = dets.reduce((a, d) => (d.y2 - d.y1 > a.y2 - a.y1 ? d : a));
  const w = largest.x2 - largest.x1,
    h = largest.y2 - largest.y1;
  const canvasH = DETECT_INPUT_HEIGHT * passGeometry(img.width, img.height, pad).k;
  if (h < rule.minHeight * canvasH || h > rule.maxHeight * canvasH) return false;
  return (
    largest.x1 >= rule.margin * w && largest.y1 >= rule.margin * h && largest.x2 <= img.width - rule.margin * w && largest.y2 <= img.height - rule.margin * h
  );
}

/**
 * Detect faces: every pass of `opts.passes` (the padded ones skipped when the first found a face well
 * inside the frame), mapped back to image coordinates and merged with NMS
 * (IoU or containment); sorted by score, highest first. Boxes centred outside the image (in the
 * grey border) are dropped. Boxes are not clipped: a close-up's box may
 * extend past the image edge, and the landmark crop needs the box as the detector saw it.
 */
export async function detectFaces(session: ort.InferenceSession, img: RgbImage, opts: DetectOptions = DEFAULT_DETECT_OPTIONS): Promise<Detection[]> {
  const all: Detection[] = [];
  for (let p = 0; p < opts.passes.length; p++) {
    all.push(...(await detectPass(session, img, opts.passes[p]!, opts, p)));
    if (p === 0 && opts.skipPaddedWhenInside && wellInside(all, img, opts.passes[0]!, opts.skipPaddedWhenInside)) break;
  }
  // A box centred in the letterbox / padding border is not a face of the image.
  const inside = all.filter((d) => {
    const cx = (d.x1 + d.x2) / 2,
      cy = (d.y1 + d.y2) / 2;
    return cx >= 0 && cx <= img.width && cy >= 0 && cy <= img.height;
  });
  return nms(inside, opts.nmsIou, opts.containment);
}
