/**
 * Capture quality (ISO/IEC 29794-5 style), computed in the liveness stage from what it already has:
 * the decoded image, the chosen face's 68 landmarks and its five alignment points. The image
 * measures read the 112x112 crop the embedder will see (align.ts's transform and sampling; see
 * alignedLuma), so they judge what the matcher gets, whatever the photo's size.
 *
 * Each measure has an acceptable range (QUALITY_RANGES) and a documented source: the OFIQ reference
 * implementation of ISO/IEC 29794-5 where it gives a number, otherwise the fixture photos and their
 * degraded copies (scripts/quality-degradations.ts, table in docs/face-engine.md). A measure outside
 * its range raises its issue. Each measure also maps to a component score in 0..1: 1 inside the
 * "good" end of its range, 0.5 exactly at the issue limit, 0 at the "bad" end, linear in between.
 * The capture's score is 100 x the weakest component, so `score < 50` if and only if some issue is
 * raised, and two good captures are told apart by their weakest measure.
 *
 * Cost: the luma of the inner face of the aligned crop (about 4,500 pixels) and a few passes over
 * it, about a millisecond whatever the photo (`npm run bench -- stages` measures it).
 */
import type { RgbImage } from '../../../../platform/face/image.js';
import { ALIGNED_SIZE, ARCFACE_TEMPLATE_112, estimateSimilarity, invertAffine, type Affine, type Point } from './align.js';
import { QUALITY_ISSUES, type QualityAssessment, type QualityIssue, type QualityMeasures, type QualitySummary } from '../../../../platform/face/quality.js';

/**
 * One measure's range: `issueAt` is the limit (outside it the issue is raised), `goodAt` where the
 * component reaches 1, `badAt` where it reaches 0. For "higher is better" measures goodAt > issueAt
 * > badAt; for "lower is better" ones the order is reversed.
 */
export interface MeasureRange {
  goodAt: number;
  issueAt: number;
  badAt: number;
}

/**
 * The acceptable ranges. Sources (details and the measured figures in docs/face-engine.md):
 * - interEyeDistancePx: OFIQ InterEyeDistance scores 50 at 70 px (sigmoid x0 = 70, w = 20), ICAO /
 *   ISO/IEC 39794-5 ask >= 90 px for document photos. Those are enrolment-grade; this matcher embeds a
 *   112x112 crop whose template inter-eye distance is 35 px, and the degradation table shows where it
 *   breaks: the limit is set there.
 * - outsideFrame: measured (the tightest LFW close-up, whose aligned crop already reaches past the
 *   tile, is at 0.14; the crop degradation).
 * - yaw / pitch: OFIQ scores pose by 100 cos^2(angle) (50 at 45 degrees); ISO/IEC 39794-5 asks +-5
 *   degrees for document photos. Selfie limits: yaw 40 degrees (OFIQ 59), pitch 30 (OFIQ 75; the
 *   generic model reads up to 22 degrees of pitch on frontal fixtures).
 * - roll: ISO/IEC 39794-5 +-8 degrees; the alignment removes roll, so the limit is where the landmark
 *   model starts failing on rotated copies (degradation table).
 * - eyeOpenness: OFIQ EyesOpen (sigmoid x0 = 0.02 of the inter-eye distance), measured on fixtures.
 * - sharpness, eyeContrast, eyeDarkShare: measured on the fixtures and their degraded copies.
 * - luminanceSd: OFIQ LuminanceVariance scores >= 50 for an s.d. of 0.058..0.29; set lower (0.04).
 * - luminanceMean: OFIQ LuminanceMean scores 50 at 0.2 and 0.8 (sigmoids at 0.2 and 0.8, w = 0.05).
 * - darkShare / brightShare: OFIQ Under/OverExposurePrevention count face pixels in [0, 25] and
 *   [247, 255]; OFIQ's over-exposure score is 1 / (share + 0.01), i.e. 50 at 1% of the face clipped.
 */
export const QUALITY_RANGES = {
  interEyeDistancePx: { goodAt: 40, issueAt: 20, badAt: 10 },
  outsideFrame: { goodAt: 0.05, issueAt: 0.15, badAt: 0.45 },
  yawDeg: { goodAt: 20, issueAt: 40, badAt: 70 },
  pitchDeg: { goodAt: 15, issueAt: 30, badAt: 60 },
  rollDeg: { goodAt: 10, issueAt: 25, badAt: 50 },
  eyeOpenness: { goodAt: 0.05, issueAt: 0.02, badAt: 0 },
  eyeContrast: { goodAt: 0.3, issueAt: 0.1, badAt: 0.02 },
  eyeDarkShare: { goodAt: 0.3, issueAt: 0.5, badAt: 0.9 },
  sharpness: { goodAt: 0.1, issueAt: 0.03, badAt: 0.008 },
  luminanceMeanLow: { goodAt: 0.3, issueAt: 0.2, badAt: 0.08 },
  luminanceMeanHigh: { goodAt: 0.7, issueAt: 0.8, badAt: 0.95 },
  darkShare: { goodAt: 0.05, issueAt: 0.3, badAt: 0.8 },
  brightShare: { goodAt: 0.01, issueAt: 0.1, badAt: 0.5 },
  luminanceSd: { goodAt: 0.08, issueAt: 0.04, badAt: 0.015 },
} as const satisfies Record<string, MeasureRange>;

/** Component score 0..1 of one value against its range (0.5 at the issue limit, linear). */
export function component(value: number, r: MeasureRange): number {
  const higherIsBetter = r.goodAt > r.badAt;
  const v = higherIsBetter ? value : -value;
  const good = higherIsBetter ? r.goodAt : -r.goodAt;
  const issue = higherIsBetter ? r.issueAt : -r.issueAt;
  const bad = higherIsBetter ? r.badAt : -r.badAt;
  if (!Number.isFinite(v)) return 0;
  if (v >= good) return 1;
  if (v >= issue) return 0.5 + (0.5 * (v - issue)) / (good - issue);
  if (v <= bad) return 0;
  return (0.5 * (v - bad)) / (issue - bad);
}

// ----------------------------------------------------------------------------------------------
// Geometry from the 68 landmarks
// ----------------------------------------------------------------------------------------------

const dist = (a: Point, b: Point) => Math.hypot(a[0] - b[0], a[1] - b[1]);
const mid = (pts: readonly Point[], idx: readonly number[]): Point => {
  let x = 0,
    y = 0;
  for (const i of idx) {
    x += pts[i]![0];
    y += pts[i]![1];
  }
  return [x / idx.length, y / idx.length];
};

/**
 * A generic 3-D face (millimetre-like units, x right, y up, z towards the camera) for six iBUG-68
 * points: nose tip 30, chin 8, outer eye corners 36 and 45, mouth corners 48 and 54. The widely used
 * model of Mallick's "Head Pose Estimation using OpenCV and Dlib" (LearnOpenCV, 2016).
 */
const POSE_MODEL: ReadonlyArray<[number, [number, number, number]]> = [
  [30, [0, 0, 0]],
  [8, [0, -330, -65]],
  [36, [-225, 170, -135]],
  [45, [225, 170, -135]],
  [48, [-150, -150, -125]],
  [54, [150, -150, -125]],
];

function inverse3(m: number[][]): number[][] | null {
  const [a, b, c] = m[0]!,
    [d, e, f] = m[1]!,
    [g, h, i] = m[2]!;
  const A = e * i - f * h,
    B = -(d * i - f * g),
    C = d * h - e * g;
  const det = a! * A + b! * B + c! * C;
  if (!Number.isFinite(det) || Math.abs(det) < 1e-9) return null;
  return [
    [A / det, -(b! * i! - c! * h!) / det, (b! * f! - c! * e!) / det],
    [B / det, (a! * i! - c! * g!) / det, -(a! * f! - c! * d!) / det],
    [C / det, -(a! * h! - b! * g!) / det, (a! * e! - b! * d!) / det],
  ];
}

/**
 * Yaw and pitch in degrees from a scaled-orthographic fit of the generic model to six landmarks
 * (least-squares 2x3 camera, rows orthonormalised; Euler order Rz·Ry·Rx). Roll comes from the eye
 * line instead, which is the more reliable estimate. Accurate to several degrees at best: the model
 * is generic and the camera assumed distant, which suits a limit of 25 degrees, not a measurement.
 */
export function headPose(points68: readonly Point[]): { yawDeg: number; pitchDeg: number; rollDeg: number } {
  const n = POSE_MODEL.length;
  let mx = 0,
    my = 0,
    mz = 0,
    mu = 0,
    mv = 0;
  for (const [i, [x, y, z]] of POSE_MODEL) {
    mx += x;
    my += y;
    mz += z;
    mu += points68[i]![0];
    mv += -points68[i]![1]; // image y points down; the model's y points up
  }
  mx /= n;
  my /= n;
  mz /= n;
  mu /= n;
  mv /= n;
  const XX = [
    [0, 0, 0],
    [0, 0, 0],
    [0, 0, 0],
  ];
  const PX = [
    [0, 0, 0],
    [0, 0, 0],
  ];
  for (const [i, [x, y, z]] of POSE_MODEL) {
    const X = [x - mx, y - my, z - mz];
    const P = [points68[i]![0] - mu, -points68[i]![1] - mv];
    for (let r = 0; r < 3; r++) for (let c = 0; c < 3; c++) XX[r]![c]! += X[r]! * X[c]!;
    for (let r = 0; r < 2; r++) for (let c = 0; c < 3; c++) PX[r]![c]! += P[r]! * X[c]!;
  }
  const inv = inverse3(XX);
  const eyeL = mid(points68, [36, 39]),
    eyeR = mid(points68, [42, 45]);
  const rollDeg = (Math.atan2(eyeR[1] - eyeL[1], eyeR[0] - eyeL[0]) * 180) / Math.PI;
  if (!inv) return { yawDeg: NaN, pitchDeg: NaN, rollDeg };
  const A = PX.map((row) => [0, 1, 2].map((c) => row[0]! * inv[0]![c]! + row[1]! * inv[1]![c]! + row[2]! * inv[2]![c]!));
  const norm = (v: number[]) => Math.hypot(v[0]!, v[1]!, v[2]!);
  const r1 = A[0]!.map((v) => v / norm(A[0]!));
  let r2 = A[1]!.map((v) => v / norm(A[1]!));
  const d = r1[0]! * r2[0]! + r1[1]! * r2[1]! + r1[2]! * r2[2]!;
  r2 = r2.map((v, k) => v - d * r1[k]!);
  r2 = r2.map((v) => v / norm(r2));
  const r3 = [r1[1]! * r2[2]! - r1[2]! * r2[1]!, r1[2]! * r2[0]! - r1[0]! * r2[2]!, r1[0]! * r2[1]! - r1[1]! * r2[0]!];
  const deg = (rad: number) => (rad * 180) / Math.PI;
  const yawDeg = deg(Math.asin(Math.max(-1, Math.min(1, -r3[0]!))));
  const pitchDeg = deg(Math.atan2(r3[1]!, r3[2]!));
  return { yawDeg, pitchDeg, rollDeg };
}

/** Eyelid opening (mean of the two lid distances) over the inter-eye distance, the smaller eye. */
function eyeOpenness(p: readonly Point[], ied: number): number {
  const left = (dist(p[37]!, p[41]!) + dist(p[38]!, p[40]!)) / 2;
  const right = (dist(p[43]!, p[47]!) + dist(p[44]!, p[46]!)) / 2;
  return Math.min(left, right) / ied;
}

// ----------------------------------------------------------------------------------------------
// Image measures on the aligned face
// ----------------------------------------------------------------------------------------------

/**
 * The face region of the aligned 112x112 face: the inner face between the cheeks, from the brows to
 * below the mouth (the ArcFace template puts the eyes at y = 51.6, the mouth corners at y = 92.3 and
 * x = 41.5 .. 70.7). Hair, ears and background stay out, so exposure is that of the skin.
 */
export const FACE_REGION = { x0: 26, x1: 86, y0: 34, y1: 104 } as const;
/**
 * Eye regions of the aligned face: 15 x 6 px around the template's eye centres (38.3, 51.7) and
 * (73.5, 51.5), the eye itself (an eye is about 0.3 IED = 10 px wide), not the brow or the cheek.
 */
export const EYE_REGIONS = [
  { x0: 31, x1: 46, y0: 49, y1: 55 },
  { x0: 66, x1: 81, y0: 49, y1: 55 },
] as const;

type Region = { x0: number; x1: number; y0: number; y1: number };

function regionStats(luma: Float32Array, r: Region): { mean: number; sd: number } {
  let s = 0,
    ss = 0,
    n = 0;
  for (let y = r.y0; y < r.y1; y++) {
    for (let x = r.x0; x < r.x1; x++) {
      const v = luma[y * ALIGNED_SIZE + x]!;
      s += v;
      ss += v * v;
      n++;
    }
  }
  const mean = s / n;
  return { mean, sd: Math.sqrt(Math.max(0, ss / n - mean * mean)) };
}

/** Share of a region's pixels darker than `below` (an eye hidden by a dark band or sunglasses). */
function darkShareIn(luma: Float32Array, r: Region, below: number): number {
  let dark = 0,
    n = 0;
  for (let y = r.y0; y < r.y1; y++) {
    for (let x = r.x0; x < r.x1; x++) {
      n++;
      if (luma[y * ALIGNED_SIZE + x]! < below) dark++;
    }
  }
  return dark / n;
}

/** Share of the face region of the aligned crop whose source lies outside the photo (sampled 4x4 px). */
function outsideShare(transform: Affine, width: number, height: number): number {
  const [a, b, c, d, e, f] = transform;
  // aligned -> image: invert the similarity
  const det = a * e - b * d;
  const ia = e / det,
    ib = -b / det,
    id = -d / det,
    ie = a / det;
  let outside = 0,
    n = 0;
  for (let y = FACE_REGION.y0 + 2; y < FACE_REGION.y1; y += 4) {
    for (let x = FACE_REGION.x0 + 2; x < FACE_REGION.x1; x += 4) {
      const u = x - c,
        v = y - f;
      const sx = ia * u + ib * v,
        sy = id * u + ie * v;
      if (sx < 0 || sy < 0 || sx > width || sy > height) outside++;
      n++;
    }
  }
  return outside / n;
}

export interface QualityInput {
  img: RgbImage;
  /** The 68 landmarks of the chosen face, image coordinates. */
  points68: readonly Point[];
  /** Its five alignment points (landmarks.ts fivePoints). */
  landmarks5: readonly Point[];
}

const lumaAt = (data: Uint8Array, p: number) => 0.299 * data[p]! + 0.587 * data[p + 1]! + 0.114 * data[p + 2]!;

/**
 * BT.601 luma of the aligned 112x112 face, computed only over FACE_REGION and a 1 px margin (what
 * the measures read; elsewhere 0). Up to 2 source pixels per aligned pixel the sampling is exactly
 * align.ts's ALIGN_WARP (n x n bilinear samples, edge pixels repeated), so the values are the
 * embedder's input. Beyond that (large faces: a 1280 px selfie has 4-8 source pixels per aligned
 * pixel) each aligned pixel is the exact mean of its source footprint (a square of side = scale,
 * from an integral image of the footprint's bounding box): the same low-pass the embedder's
 * 3x3 / 4x4 samples approximate, at a cost that does not grow with the face.
 */
function alignedLuma(img: RgbImage, outToSrc: Affine): Float32Array {
  const { data, width: W, height: H } = img;
  const S = ALIGNED_SIZE;
  const out = new Float32Array(S * S);
  const [a, b, c, d, e, f] = outToSrc;
  const scale = Math.sqrt(Math.abs(a * e - b * d));
  const u0 = FACE_REGION.x0 - 1,
    u1 = FACE_REGION.x1,
    v0 = FACE_REGION.y0 - 1,
    v1 = FACE_REGION.y1;
  const maxX = W - 1,
    maxY = H - 1;
  if (scale <= 2) {
    const n = Math.max(1, Math.ceil(scale - 1e-6));
    const inv = 1 / (n * n);
    for (let v = v0; v <= v1; v++) {
      for (let u = u0; u <= u1; u++) {
        let acc = 0;
        for (let sj = 0; sj < n; sj++) {
          const vy = v + (sj + 0.5) / n;
          for (let si = 0; si < n; si++) {
            const ux = u + (si + 0.5) / n;
            const x = a * ux + b * vy + c - 0.5;
            const y = d * ux + e * vy + f - 0.5;
            let x0 = Math.floor(x),
              y0 = Math.floor(y);
            const fx = x - x0,
              fy = y - y0;
            let x1 = x0 + 1,
              y1 = y0 + 1;
            if (x0 < 0) x0 = 0;
            else if (x0 > maxX) x0 = maxX;
            if (x1 < 0) x1 = 0;
            else if (x1 > maxX) x1 = maxX;
            if (y0 < 0) y0 = 0;
            else if (y0 > maxY) y0 = maxY;
            if (y1 < 0) y1 = 0;
            else if (y1 > maxY) y1 = maxY;
            const l00 = lumaAt(data, (y0 * W + x0) * 3),
              l01 = lumaAt(data, (y0 * W + x1) * 3);
            const l10 = lumaAt(data, (y1 * W + x0) * 3),
              l11 = lumaAt(data, (y1 * W + x1) * 3);
            acc += (l00 * (1 - fx) + l01 * fx) * (1 - fy) + (l10 * (1 - fx) + l11 * fx) * fy;
          }
        }
        out[v * S + u] = acc * inv;
      }
    }
    return out;
  }
  // Bounding box (whole pixels) of every footprint, clipped to the image.
  const half = scale / 2;
  let bx0 = Infinity,
    by0 = Infinity,
    bx1 = -Infinity,
    by1 = -Infinity;
  for (const [u, v] of [
    [u0, v0],
    [u1 + 1, v0],
    [u0, v1 + 1],
    [u1 + 1, v1 + 1],
  ] as const) {
    const x = a * u + b * v + c,
      y = d * u + e * v + f;
    bx0 = Math.min(bx0, x);
    bx1 = Math.max(bx1, x);
    by0 = Math.min(by0, y);
    by1 = Math.max(by1, y);
  }
  bx0 = Math.max(0, Math.floor(bx0 - half - 1));
  by0 = Math.max(0, Math.floor(by0 - half - 1));
  bx1 = Math.min(W, Math.ceil(bx1 + half + 1));
  by1 = Math.min(H, Math.ceil(by1 + half + 1));
  if (!(bx1 > bx0 && by1 > by0)) return out; // the face region lies wholly outside the photo
  const bw = bx1 - bx0,
    bh = by1 - by0,
    stride = bw + 1;
  // integral[(j) * stride + i] = sum of luma over [bx0, bx0 + i) x [by0, by0 + j)
  const integral = new Float64Array(stride * (bh + 1));
  for (let j = 0; j < bh; j++) {
    let row = 0;
    const src = ((by0 + j) * W + bx0) * 3;
    for (let i = 0; i < bw; i++) {
      row += lumaAt(data, src + i * 3);
      integral[(j + 1) * stride + i + 1] = integral[j * stride + i + 1]! + row;
    }
  }
  // The integral at a continuous point: bilinear in the integral image, exact for pixel-wise constant luma.
  const at = (x: number, y: number) => {
    const gx = Math.min(bw, Math.max(0, x - bx0)),
      gy = Math.min(bh, Math.max(0, y - by0));
    const i = Math.min(bw - 1, Math.floor(gx)),
      j = Math.min(bh - 1, Math.floor(gy));
    const fx = gx - i,
      fy = gy - j;
    const k = j * stride + i;
    return (integral[k]! * (1 - fx) + integral[k + 1]! * fx) * (1 - fy) + (integral[k + stride]! * (1 - fx) + integral[k + stride + 1]! * fx) * fy;
  };
  for (let v = v0; v <= v1; v++) {
    for (let u = u0; u <= u1; u++) {
      const x = a * (u + 0.5) + b * (v + 0.5) + c,
        y = d * (u + 0.5) + e * (v + 0.5) + f;
      // The footprint, clipped to the image (outside it the edge repeats: the clipped mean stands in).
      let xa = Math.max(bx0, x - half),
        xb = Math.min(bx1, x + half);
      let ya = Math.max(by0, y - half),
        yb = Math.min(by1, y + half);
      if (xb - xa < 1) {
        const m = Math.min(Math.max(x, bx0 + 0.5), bx1 - 0.5);
        xa = m - 0.5;
        xb = m + 0.5;
      }
      if (yb - ya < 1) {
        const m = Math.min(Math.max(y, by0 + 0.5), by1 - 0.5);
        ya = m - 0.5;
        yb = m + 0.5;
      }
      out[v * S + u] = (at(xb, yb) - at(xa, yb) - at(xb, ya) + at(xa, ya)) / ((xb - xa) * (yb - ya));
    }
  }
  return out;
}

/** Every raw measure of one face. */
export function measureQuality({ img, points68, landmarks5 }: QualityInput): QualityMeasures {
  const ied = dist(landmarks5[0]!, landmarks5[1]!);
  // The embedder's alignment (align.ts alignFace): template in continuous coordinates (+0.5).
  const transform = estimateSimilarity(
    landmarks5,
    ARCFACE_TEMPLATE_112.map(([x, y]): Point => [x + 0.5, y + 0.5]),
  );
  const S = ALIGNED_SIZE;
  const luma = alignedLuma(img, invertAffine(transform));

  // exposure and contrast of the face region; Laplacian energy for sharpness
  let s = 0,
    ss = 0,
    n = 0,
    dark = 0,
    bright = 0,
    lap = 0,
    lap2 = 0;
  for (let y = FACE_REGION.y0; y < FACE_REGION.y1; y++) {
    for (let x = FACE_REGION.x0; x < FACE_REGION.x1; x++) {
      const k = y * S + x;
      const v = luma[k]!;
      s += v;
      ss += v * v;
      n++;
      if (v <= 25) dark++;
      if (v >= 247) bright++;
      const L = luma[k - 1]! + luma[k + 1]! + luma[k - S]! + luma[k + S]! - 4 * v;
      lap += L;
      lap2 += L * L;
    }
  }
  const mean = s / n;
  const variance = Math.max(0, ss / n - mean * mean);
  const lapMean = lap / n;
  const lapVar = Math.max(0, lap2 / n - lapMean * lapMean);
  const eyes = EYE_REGIONS.map((r) => regionStats(luma, r).sd);
  const eyeDark = EYE_REGIONS.map((r) => darkShareIn(luma, r, 0.35 * (s / n)));
  const faceSd = Math.sqrt(variance);
  const pose = headPose(points68);

  return {
    interEyeDistancePx: ied,
    outsideFrame: outsideShare(transform, img.width, img.height),
    yawDeg: pose.yawDeg,
    pitchDeg: pose.pitchDeg,
    rollDeg: pose.rollDeg,
    eyeOpenness: eyeOpenness(points68, ied),
    eyeContrast: faceSd > 0 ? Math.min(...eyes) / faceSd : 0,
    eyeDarkShare: Math.max(...eyeDark),
    // Variance of the Laplacian relative to the luminance variance: a ratio, so that darkening or
    // brightening the photo (a gain) does not read as blur.
    sharpness: variance > 1e-6 ? lapVar / variance : 0,
    luminanceMean: mean / 255,
    darkShare: dark / n,
    brightShare: bright / n,
    luminanceSd: faceSd / 255,
  };
}

/** Component scores and the issue each one raises. */
function judge(m: QualityMeasures): Array<{ issue: QualityIssue; c: number }> {
  const R = QUALITY_RANGES;
  return [
    { issue: 'face_too_small', c: component(m.interEyeDistancePx, R.interEyeDistancePx) },
    { issue: 'face_cut_off', c: component(m.outsideFrame, R.outsideFrame) },
    { issue: 'not_frontal', c: component(Math.abs(m.yawDeg), R.yawDeg) },
    { issue: 'not_frontal', c: component(Math.abs(m.pitchDeg), R.pitchDeg) },
    { issue: 'not_frontal', c: component(Math.abs(m.rollDeg), R.rollDeg) },
    { issue: 'eyes_not_visible', c: component(m.eyeOpenness, R.eyeOpenness) },
    { issue: 'eyes_not_visible', c: component(m.eyeContrast, R.eyeContrast) },
    { issue: 'eyes_not_visible', c: component(m.eyeDarkShare, R.eyeDarkShare) },
    { issue: 'blurred', c: component(m.sharpness, R.sharpness) },
    { issue: 'too_dark', c: component(m.luminanceMean, R.luminanceMeanLow) },
    { issue: 'too_dark', c: component(m.darkShare, R.darkShare) },
    { issue: 'too_bright', c: component(m.luminanceMean, R.luminanceMeanHigh) },
    { issue: 'too_bright', c: component(m.brightShare, R.brightShare) },
    { issue: 'low_contrast', c: component(m.luminanceSd, R.luminanceSd) },
  ];
}

const round = (v: number, digits: number) => {
  const k = 10 ** digits;
  return Math.round(v * k) / k;
};

/** The assessment of one face: raw measures, issues (fixed order) and the 0..100 score. */
export function assessQuality(input: QualityInput): QualityAssessment {
  const m = measureQuality(input);
  const judged = judge(m);
  const raised = new Set(judged.filter((j) => j.c < 0.5).map((j) => j.issue));
  const weakest = Math.min(...judged.map((j) => j.c));
  const measures = Object.fromEntries(Object.entries(m).map(([k, v]) => [k, round(v, 4)])) as unknown as QualityMeasures;
  return {
    score: Math.floor(100 * weakest + 1e-9),
    issues: QUALITY_ISSUES.filter((i) => raised.has(i)),
    measures,
  };
}

// ----------------------------------------------------------------------------------------------
// The whole photo, when no face was found
// ----------------------------------------------------------------------------------------------

/** Longest side of the luma the whole-photo measures read (area means of the photo's pixels). */
export const WHOLE_IMAGE_SIDE = 128;

/**
 * Ranges of the whole-photo measures, from the fixture photos and their degraded copies
 * (scripts/quality-degradations.ts degradations, measured where the detector stops finding the face):
 * - sharpness at WHOLE_IMAGE_SIDE: undegraded photos 0.017 .. 0.96; blurred copies without a face
 *   0.001 .. 0.008.
 * - luminance mean: the face's limits (a photo darker than a face may be is too dark for one).
 * - dark / bright share: higher limits than the face's, since a dark background or a bright sky fills
 *   much of a good photo (undegraded: up to 0.48 dark, 0.11 bright; darkened or over-exposed copies
 *   without a face: 0.53 .. 1 dark, 0.85 .. 1 bright).
 */
export const WHOLE_IMAGE_RANGES = {
  sharpness: { goodAt: 0.03, issueAt: 0.01, badAt: 0.002 },
  darkShare: { goodAt: 0.5, issueAt: 0.8, badAt: 0.98 },
  brightShare: { goodAt: 0.2, issueAt: 0.5, badAt: 0.9 },
} as const satisfies Record<string, MeasureRange>;

/** Exposure and sharpness of a whole photo, in the units of QualityMeasures. */
export function measureWholeImage(img: RgbImage): { luminanceMean: number; darkShare: number; brightShare: number; sharpness: number } {
  const { data, width: W, height: H } = img;
  const k = Math.max(1, Math.max(W, H) / WHOLE_IMAGE_SIDE);
  const w = Math.max(3, Math.floor(W / k)),
    h = Math.max(3, Math.floor(H / k));
  const luma = new Float32Array(w * h);
  for (let y = 0; y < h; y++) {
    const sy0 = Math.floor((y * H) / h),
      sy1 = Math.max(sy0 + 1, Math.floor(((y + 1) * H) / h));
    for (let x = 0; x < w; x++) {
      const sx0 = Math.floor((x * W) / w),
        sx1 = Math.max(sx0 + 1, Math.floor(((x + 1) * W) / w));
      let acc = 0;
      for (let sy = sy0; sy < sy1; sy++) for (let sx = sx0; sx < sx1; sx++) acc += lumaAt(data, (sy * W + sx) * 3);
      luma[y * w + x] = acc / ((sy1 - sy0) * (sx1 - sx0));
    }
  }
  let s = 0,
    ss = 0,
    n = 0,
    dark = 0,
    bright = 0;
  for (const v of luma) {
    s += v;
    ss += v * v;
    n++;
    if (v <= 25) dark++;
    if (v >= 247) bright++;
  }
  const mean = s / n;
  const variance = Math.max(0, ss / n - mean * mean);
  let lap = 0,
    lap2 = 0,
    m = 0;
  for (let y = 1; y < h - 1; y++) {
    for (let x = 1; x < w - 1; x++) {
      const i = y * w + x;
      const L = luma[i - 1]! + luma[i + 1]! + luma[i - w]! + luma[i + w]! - 4 * luma[i]!;
      lap += L;
      lap2 += L * L;
      m++;
    }
  }
  const lapMean = lap / m;
  return {
    luminanceMean: mean / 255,
    darkShare: dark / n,
    brightShare: bright / n,
    sharpness: variance > 1e-6 ? Math.max(0, lap2 / m - lapMean * lapMean) / variance : 0,
  };
}

/**
 * Advice on a photo where no face was found: whether the whole photo is too dark, too bright or too
 * blurred (the only issues a photo without a face can show). Score as for a face: 100 x the weakest
 * component, below 50 exactly when an issue is raised.
 */
export function assessWholeImage(img: RgbImage): QualitySummary {
  const m = measureWholeImage(img);
  const R = QUALITY_RANGES;
  const judged: Array<{ issue: QualityIssue; c: number }> = [
    { issue: 'blurred', c: component(m.sharpness, WHOLE_IMAGE_RANGES.sharpness) },
    { issue: 'too_dark', c: component(m.luminanceMean, R.luminanceMeanLow) },
    { issue: 'too_dark', c: component(m.darkShare, WHOLE_IMAGE_RANGES.darkShare) },
    { issue: 'too_bright', c: component(m.luminanceMean, R.luminanceMeanHigh) },
    { issue: 'too_bright', c: component(m.brightShare, WHOLE_IMAGE_RANGES.brightShare) },
  ];
  const raised = new Set(judged.filter((j) => j.c < 0.5).map((j) => j.issue));
  return { score: Math.floor(100 * Math.min(...judged.map((j) => j.c)) + 1e-9), issues: QUALITY_ISSUES.filter((i) => raised.has(i)) };
}
