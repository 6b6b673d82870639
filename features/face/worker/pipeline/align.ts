/**
 * Geometry and resampling shared by the pipeline, and the 5-point face alignment.
 *
 * Coordinates are continuous pixel coordinates of the (upright, normalised) image: pixel (i, j)
 * covers [i, i+1) x [j, j+1), so its centre is (i + 0.5, j + 0.5). Boxes, landmarks and transforms
 * all use this convention; the ArcFace template, published in OpenCV's integer-centre convention, is
 * shifted by +0.5 accordingly.
 */
import type { RgbImage } from '../../../../platform/face/image.js';

export type Point = [number, number];
/** 2x3 affine matrix [a, b, c, d, e, f]: x' = a*x + b*y + c, y' = d*x + e*y + f. */
export type Affine = readonly [number, number, number, number, number, number];

/** Axis-aligned rectangle in continuous pixel coordinates. */
export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

export const ALIGNED_SIZE = 112;

/**
 * The standard ArcFace 112x112 five-point template (insightface `arcface_dst`; also the
 * REFERENCE_FACIAL_POINTS of faceplugin's fr_feature.js): left eye, right eye, nose tip, left and
 * right mouth corner, in OpenCV coordinates (pixel centres on integers), image left/right.
 */
export const ARCFACE_TEMPLATE_112: readonly Point[] = [
  [38.2946, 51.6963],
  [73.5318, 51.5014],
  [56.0252, 71.7366],
  [41.5493, 92.3655],
  [70.7299, 92.2041],
];

export function applyAffine(m: Affine, p: Point): Point {
  return [m[0] * p[0] + m[1] * p[1] + m[2], m[3] * p[0] + m[4] * p[1] + m[5]];
}

export function invertAffine(m: Affine): Affine {
  const [a, b, c, d, e, f] = m;
  const det = a * e - b * d;
  if (!Number.isFinite(det) || Math.abs(det) < 1e-12) throw new RangeError('affine transform is singular');
  const ia = e / det;
  const ib = -b / det;
  const id = -d / det;
  const ie = a / det;
  return [ia, ib, -(ia * c + ib * f), id, ie, -(id * c + ie * f)];
}

/**
 * Least-squares similarity transform (rotation, uniform scale, translation; no reflection) mapping
 * `src` onto `dst`: the closed form of Umeyama (1991) in two dimensions. Writing points as complex
 * numbers, dst ≈ w·src + t with w = Σ conj(s̃)·d̃ / Σ|s̃|², s̃ and d̃ being the centred points; w = s·e^{iθ}.
 */
export function estimateSimilarity(src: readonly Point[], dst: readonly Point[]): Affine {
  const n = src.length;
  if (n < 2 || dst.length !== n) throw new RangeError('need at least two point pairs of equal count');
  let msx = 0,
    msy = 0,
    mdx = 0,
    mdy = 0;
  for (let i = 0; i < n; i++) {
    msx += src[i]![0];
    msy += src[i]![1];
    mdx += dst[i]![0];
    mdy += dst[i]![1];
  }
  msx /= n;
  msy /= n;
  mdx /= n;
  mdy /= n;
  let ss = 0,
    re = 0,
    im = 0;
  for (let i = 0; i < n; i++) {
    const sx = src[i]![0] - msx,
      sy = src[i]![1] - msy;
    const dx = dst[i]![0] - mdx,
      dy = dst[i]![1] - mdy;
    ss += sx * sx + sy * sy;
    re += sx * dx + sy * dy;
    im += sx * dy - sy * dx;
  }
  if (!(ss > 1e-9)) throw new RangeError('source points are degenerate (all coincide)');
  const a = re / ss; // s·cosθ
  const b = im / ss; // s·sinθ
  return [a, -b, mdx - (a * msx - b * msy), b, a, mdy - (b * msx + a * msy)];
}

export interface WarpOptions {
  /** Outside the source: repeat the edge pixels, or use a constant grey level (0..255). */
  border: 'replicate' | { fill: number };
  /**
   * Average n×n bilinear samples per output pixel, n = ceil(source pixels per output pixel) capped
   * at 4, so that downscaling does not alias. false = one bilinear sample (OpenCV INTER_LINEAR).
   */
  antialias: boolean;
}

/**
 * Resample `img` through an affine map from output coordinates to source coordinates. Returns
 * interleaved RGB as float 0..255 (outW*outH*3), which each model then normalises.
 */
export function warpAffine(img: RgbImage, outToSrc: Affine, outW: number, outH: number, opts: WarpOptions): Float32Array {
  const { data, width: W, height: H } = img;
  const out = new Float32Array(outW * outH * 3);
  const [a, b, c, d, e, f] = outToSrc;
  const scale = Math.sqrt(Math.abs(a * e - b * d));
  const n = opts.antialias ? Math.max(1, Math.min(4, Math.ceil(scale - 1e-6))) : 1;
  const inv = 1 / (n * n);
  const replicate = opts.border === 'replicate';
  const fill = opts.border === 'replicate' ? 0 : opts.border.fill;
  const maxX = W - 1,
    maxY = H - 1;
  let o = 0;
  for (let v = 0; v < outH; v++) {
    for (let u = 0; u < outW; u++) {
      let r = 0,
        g = 0,
        bl = 0;
      for (let sj = 0; sj < n; sj++) {
        const vy = v + (sj + 0.5) / n;
        for (let si = 0; si < n; si++) {
          const ux = u + (si + 0.5) / n;
          // continuous source coordinates -> index coordinates (pixel centres on integers)
          const x = a * ux + b * vy + c - 0.5;
          const y = d * ux + e * vy + f - 0.5;
          let x0 = Math.floor(x),
            y0 = Math.floor(y);
          const fx = x - x0,
            fy = y - y0;
          let x1 = x0 + 1,
            y1 = y0 + 1;
          if (replicate || (x0 >= 0 && y0 >= 0 && x1 <= maxX && y1 <= maxY)) {
            if (x0 < 0) x0 = 0;
            else if (x0 > maxX) x0 = maxX;
            if (x1 < 0) x1 = 0;
            else if (x1 > maxX) x1 = maxX;
            if (y0 < 0) y0 = 0;
            else if (y0 > maxY) y0 = maxY;
            if (y1 < 0) y1 = 0;
            else if (y1 > maxY) y1 = maxY;
            const p00 = (y0 * W + x0) * 3,
              p01 = (y0 * W + x1) * 3;
            const p10 = (y1 * W + x0) * 3,
              p11 = (y1 * W + x1) * 3;
            const w00 = (1 - fx) * (1 - fy),
              w01 = fx * (1 - fy),
              w10 = (1 - fx) * fy,
              w11 = fx * fy;
            r += data[p00]! * w00 + data[p01]! * w01 + data[p10]! * w10 + data[p11]! * w11;
            g += data[p00 + 1]! * w00 + data[p01 + 1]! * w01 + data[p10 + 1]! * w10 + data[p11 + 1]! * w11;
            bl += data[p00 + 2]! * w00 + data[p01 + 2]! * w01 + data[p10 + 2]! * w10 + data[p11 + 2]! * w11;
          } else {
            // constant border: each of the four neighbours is either a pixel or the fill value
            const ws = [(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy];
            const xs = [x0, x1, x0, x1];
            const ys = [y0, y0, y1, y1];
            for (let q = 0; q < 4; q++) {
              const xq = xs[q]!,
                yq = ys[q]!,
                w = ws[q]!;
              if (xq >= 0 && xq <= maxX && yq >= 0 && yq <= maxY) {
                const p = (yq * W + xq) * 3;
                r += data[p]! * w;
                g += data[p + 1]! * w;
                bl += data[p + 2]! * w;
              } else {
                r += fill * w;
                g += fill * w;
                bl += fill * w;
              }
            }
          }
        }
      }
      out[o++] = r * inv;
      out[o++] = g * inv;
      out[o++] = bl * inv;
    }
  }
  return out;
}

/** One axis of a separable resampling: for output index u, taps start[u]..start[u+1]. */
interface AxisTaps {
  start: Int32Array;
  idx: Int32Array;
  w: Float32Array;
  /** Weight of the constant border value for each output index. */
  fill: Float32Array;
}

function axisTaps(srcSize: number, outSize: number, step: number, offset: number, antialias: boolean, replicate: boolean): AxisTaps {
  const n = antialias ? Math.max(1, Math.min(4, Math.ceil(step - 1e-6))) : 1;
  const start = new Int32Array(outSize + 1);
  // At most 2n taps per output index; neighbouring samples often share a source pixel, and such taps
  // are merged into one (same result up to float rounding, ~40 % fewer multiply-adds when shrinking).
  const idx = new Int32Array(outSize * 2 * n);
  const w = new Float32Array(outSize * 2 * n);
  const fill = new Float32Array(outSize);
  const max = srcSize - 1;
  let len = 0;
  for (let u = 0; u < outSize; u++) {
    start[u] = len;
    for (let k = 0; k < n; k++) {
      const x = step * (u + (k + 0.5) / n) + offset - 0.5;
      const x0 = Math.floor(x);
      const f = x - x0;
      for (let side = 0; side < 2; side++) {
        let i = x0 + side;
        const wt = side === 0 ? (1 - f) / n : f / n;
        if (wt === 0) continue;
        if (i < 0 || i > max) {
          if (!replicate) {
            fill[u] = fill[u]! + wt;
            continue;
          }
          i = i < 0 ? 0 : max;
        }
        if (len > start[u]! && idx[len - 1] === i) w[len - 1] = w[len - 1]! + wt;
        else {
          idx[len] = i;
          w[len] = wt;
          len++;
        }
      }
    }
  }
  start[outSize] = len;
  return { start, idx: idx.subarray(0, len), w: w.subarray(0, len), fill };
}

/**
 * The horizontal pass's rows, reused from call to call: for the detector they are megabytes, and a
 * fresh typed array of that size costs its page faults and zeroing on every call (about 2 ms per
 * 4.9 MB on this VM, in the kernel). Safe because `cropResize` fills and reads it within one
 * synchronous call, and every row it reads it has written in that call.
 */
let rowScratch = new Float32Array(0);

/**
 * Resample the rectangle `rect` of `img` (which may extend past the image) to outW x outH: the
 * axis-aligned case of `warpAffine`, with the same sampling, computed separably (rows, then columns).
 * `into` (outW x outH x 3) receives the result instead of a new array (the same values).
 *
 * Written for speed without changing a bit of the result (test/align-scratch.test.ts holds the plain
 * loops it must equal): the horizontal pass takes two source rows at a time, so each tap's offset and
 * weight are read once for both; the vertical pass sums an output's taps in a register, rounding to
 * float32 after each tap as the plain loop's store into the Float32Array did.
 */
export function cropResize(img: RgbImage, rect: Rect, outW: number, outH: number, opts: WarpOptions, into?: Float32Array): Float32Array {
  const { data, width: W, height: H } = img;
  const replicate = opts.border === 'replicate';
  const fillValue = opts.border === 'replicate' ? 0 : opts.border.fill;
  const tx = axisTaps(W, outW, rect.w / outW, rect.x, opts.antialias, replicate);
  const ty = axisTaps(H, outH, rect.h / outH, rect.y, opts.antialias, replicate);
  if (into && into.length !== outW * outH * 3) throw new RangeError(`cropResize: into holds ${into.length} values, not ${outW * outH * 3}`);
  // horizontal pass over the source rows that the vertical taps use
  const rowUsed = new Uint8Array(H);
  for (let t = 0; t < ty.idx.length; t++) rowUsed[ty.idx[t]!] = 1;
  const used: number[] = [];
  for (let r = 0; r < H; r++) if (rowUsed[r]) used.push(r);
  if (rowScratch.length < H * outW * 3) rowScratch = new Float32Array(H * outW * 3);
  const tmp = rowScratch;
  const { start: xStart, w: xW, fill: xFill } = tx;
  const xOff = new Int32Array(tx.idx.length);
  for (let t = 0; t < xOff.length; t++) xOff[t] = tx.idx[t]! * 3;
  const srcStride = W * 3;
  const rowLen = outW * 3;
  let k = 0;
  for (; k + 1 < used.length; k += 2) {
    const baseA = used[k]! * srcStride,
      baseB = used[k + 1]! * srcStride;
    let oA = used[k]! * rowLen,
      oB = used[k + 1]! * rowLen;
    for (let u = 0; u < outW; u++) {
      const fw = xFill[u]! * fillValue;
      let ar = fw,
        ag = fw,
        ab = fw,
        br = fw,
        bg = fw,
        bb = fw;
      for (let t = xStart[u]!, end = xStart[u + 1]!; t < end; t++) {
        const wt = xW[t]!;
        const pA = baseA + xOff[t]!,
          pB = baseB + xOff[t]!;
        ar += data[pA]! * wt;
        ag += data[pA + 1]! * wt;
        ab += data[pA + 2]! * wt;
        br += data[pB]! * wt;
        bg += data[pB + 1]! * wt;
        bb += data[pB + 2]! * wt;
      }
      tmp[oA++] = ar;
      tmp[oA++] = ag;
      tmp[oA++] = ab;
      tmp[oB++] = br;
      tmp[oB++] = bg;
      tmp[oB++] = bb;
    }
  }
  for (; k < used.length; k++) {
    const base = used[k]! * srcStride;
    let o = used[k]! * rowLen;
    for (let u = 0; u < outW; u++) {
      const fw = xFill[u]! * fillValue;
      let cr = fw,
        cg = fw,
        cb = fw;
      for (let t = xStart[u]!, end = xStart[u + 1]!; t < end; t++) {
        const p = base + xOff[t]!;
        const wt = xW[t]!;
        cr += data[p]! * wt;
        cg += data[p + 1]! * wt;
        cb += data[p + 2]! * wt;
      }
      tmp[o++] = cr;
      tmp[o++] = cg;
      tmp[o++] = cb;
    }
  }
  // vertical pass: each output value starts at its border share and adds its taps in order, rounded to float32 after each
  const out = into ?? new Float32Array(outW * outH * 3);
  const { start: yStart, idx: yIdx, w: yW, fill: yFill } = ty;
  const fround = Math.fround;
  for (let v = 0; v < outH; v++) {
    const base = v * rowLen;
    const a0 = fround(yFill[v]! * fillValue);
    const t0 = yStart[v]!,
      n = yStart[v + 1]! - t0;
    if (n > 6) {
      for (let i = 0; i < rowLen; i++) {
        let acc = a0;
        for (let t = t0; t < t0 + n; t++) acc = fround(acc + tmp[yIdx[t]! * rowLen + i]! * yW[t]!);
        out[base + i] = acc;
      }
      continue;
    }
    // Up to six taps (every downscale up to 3x): one loop per tap count, the taps' rows and weights in registers.
    const s = [0, 0, 0, 0, 0, 0];
    const w = [0, 0, 0, 0, 0, 0];
    for (let j = 0; j < n; j++) {
      s[j] = yIdx[t0 + j]! * rowLen;
      w[j] = yW[t0 + j]!;
    }
    const [s0, s1, s2, s3, s4, s5] = s as [number, number, number, number, number, number];
    const [w0, w1, w2, w3, w4, w5] = w as [number, number, number, number, number, number];
    if (n === 0) out.fill(a0, base, base + rowLen);
    else if (n === 1) for (let i = 0; i < rowLen; i++) out[base + i] = fround(a0 + tmp[s0 + i]! * w0);
    else if (n === 2) for (let i = 0; i < rowLen; i++) out[base + i] = fround(fround(a0 + tmp[s0 + i]! * w0) + tmp[s1 + i]! * w1);
    else if (n === 3) for (let i = 0; i < rowLen; i++) out[base + i] = fround(fround(fround(a0 + tmp[s0 + i]! * w0) + tmp[s1 + i]! * w1) + tmp[s2 + i]! * w2);
    else if (n === 4)
      for (let i = 0; i < rowLen; i++)
        out[base + i] = fround(fround(fround(fround(a0 + tmp[s0 + i]! * w0) + tmp[s1 + i]! * w1) + tmp[s2 + i]! * w2) + tmp[s3 + i]! * w3);
    else if (n === 5)
      for (let i = 0; i < rowLen; i++)
        out[base + i] = fround(
          fround(fround(fround(fround(a0 + tmp[s0 + i]! * w0) + tmp[s1 + i]! * w1) + tmp[s2 + i]! * w2) + tmp[s3 + i]! * w3) + tmp[s4 + i]! * w4,
        );
    else
      for (let i = 0; i < rowLen; i++)
        out[base + i] = fround(
          fround(fround(fround(fround(fround(a0 + tmp[s0 + i]! * w0) + tmp[s1 + i]! * w1) + tmp[s2 + i]! * w2) + tmp[s3 + i]! * w3) + tmp[s4 + i]! * w4) +
            tmp[s5 + i]! * w5,
        );
  }
  return out;
}

/**
 * Interleaved float RGB (H*W*3) -> planar NCHW tensor data with (v - mean) / std per value; into
 * `into` (every value written) when given.
 */
export function toPlanar(rgb: Float32Array, width: number, height: number, mean: number, std: number, into?: Float32Array): Float32Array {
  const plane = width * height;
  if (into && into.length !== plane * 3) throw new RangeError(`toPlanar: into holds ${into.length} values, not ${plane * 3}`);
  const out = into ?? new Float32Array(plane * 3);
  const k = 1 / std;
  for (let i = 0, p = 0; p < plane; p++, i += 3) {
    out[p] = (rgb[i]! - mean) * k;
    out[plane + p] = (rgb[i + 1]! - mean) * k;
    out[2 * plane + p] = (rgb[i + 2]! - mean) * k;
  }
  return out;
}

/** How a face is warped onto the 112x112 template before embedding. */
export const ALIGN_WARP: WarpOptions = { border: 'replicate', antialias: true };

export interface AlignedFace {
  /** 112x112 interleaved RGB, float 0..255. */
  rgb: Float32Array;
  /** Source (image) -> aligned (112x112) similarity transform. */
  transform: Affine;
}

/**
 * Align a face: least-squares similarity from its five points (left eye, right eye, nose tip, left
 * and right mouth corner, in image coordinates) to the ArcFace template, then warp to 112x112.
 */
export function alignFace(img: RgbImage, landmarks5: readonly Point[], warp: WarpOptions = ALIGN_WARP): AlignedFace {
  if (landmarks5.length !== 5) throw new RangeError('alignment needs exactly five landmarks');
  const template = ARCFACE_TEMPLATE_112.map(([x, y]): Point => [x + 0.5, y + 0.5]);
  const transform = estimateSimilarity(landmarks5, template);
  const rgb = warpAffine(img, invertAffine(transform), ALIGNED_SIZE, ALIGNED_SIZE, warp);
  return { rgb, transform };
}
