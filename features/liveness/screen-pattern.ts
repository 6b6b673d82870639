/**
 * A screen filmed by a camera leaves a periodic pattern on what it shows: the display's pixel grid
 * beating against the sensor's (moiré), a few pixels per period, at any angle. A face in front of the
 * camera has texture at those scales (skin, hair, edges), and a camera adds sensor noise and JPEG's
 * quantisation, but none of them concentrates its energy at one spatial frequency. This measure is the
 * peakiness of the fine-scale spectrum of the face's centre: the largest power at periods of 2.2 to 6
 * pixels, over the median power there (Hann-windowed 64×64 luminance window centred between the eyes
 * and the mouth, at the frame's own resolution: resampling would blur the pattern away).
 *
 * Pure (no I/O): the service and `npm run evaluate -- liveness` compute it alike. What it is worth is
 * measured in docs/face-engine.md "Liveness sessions" — on simulated screens only.
 */

const N = 64;
/** Periods (pixels) whose band is searched for a peak. */
const MIN_PERIOD = 2.2;
const MAX_PERIOD = 6;

/** In-place radix-2 FFT of one row or column (length N), real and imaginary parts. */
function fft(re: Float64Array, im: Float64Array): void {
  for (let i = 1, j = 0; i < N; i++) {
    let bit = N >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j]!, re[i]!];
      [im[i], im[j]] = [im[j]!, im[i]!];
    }
  }
  for (let size = 2; size <= N; size <<= 1) {
    const half = size >> 1;
    const step = (-2 * Math.PI) / size;
    for (let start = 0; start < N; start += size) {
      for (let k = 0; k < half; k++) {
        const c = Math.cos(step * k),
          s = Math.sin(step * k);
        const a = start + k,
          b = a + half;
        const tr = re[b]! * c - im[b]! * s;
        const ti = re[b]! * s + im[b]! * c;
        re[b] = re[a]! - tr;
        im[b] = im[a]! - ti;
        re[a] = re[a]! + tr;
        im[a] = im[a]! + ti;
      }
    }
  }
}

export interface RgbPixels {
  data: Uint8Array;
  width: number;
  height: number;
}

/**
 * The screen-pattern measure of one frame (see the module's comment); null when the window does not
 * fit in the frame.
 */
export function screenPattern(img: RgbPixels, landmarks5: readonly (readonly [number, number])[]): number | null {
  const [le, re, , lm, rm] = landmarks5 as [
    readonly [number, number],
    readonly [number, number],
    unknown,
    readonly [number, number],
    readonly [number, number],
  ];
  const cx = Math.round((le[0] + re[0] + lm[0] + rm[0]) / 4);
  const cy = Math.round((le[1] + re[1] + lm[1] + rm[1]) / 4);
  const x0 = cx - N / 2,
    y0 = cy - N / 2;
  if (x0 < 0 || y0 < 0 || x0 + N > img.width || y0 + N > img.height) return null;
  const hann = Array.from({ length: N }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * (i + 0.5)) / N));
  const lum = new Float64Array(N * N);
  let mean = 0;
  for (let y = 0; y < N; y++)
    for (let x = 0; x < N; x++) {
      const o = ((y0 + y) * img.width + x0 + x) * 3;
      const v = 0.299 * img.data[o]! + 0.587 * img.data[o + 1]! + 0.114 * img.data[o + 2]!;
      lum[y * N + x] = v;
      mean += v;
    }
  mean /= N * N;
  const re2 = new Float64Array(N * N);
  const im2 = new Float64Array(N * N);
  for (let y = 0; y < N; y++) for (let x = 0; x < N; x++) re2[y * N + x] = (lum[y * N + x]! - mean) * hann[x]! * hann[y]!;
  const r = new Float64Array(N),
    i = new Float64Array(N);
  for (let y = 0; y < N; y++) {
    for (let x = 0; x < N; x++) {
      r[x] = re2[y * N + x]!;
      i[x] = im2[y * N + x]!;
    }
    fft(r, i);
    for (let x = 0; x < N; x++) {
      re2[y * N + x] = r[x]!;
      im2[y * N + x] = i[x]!;
    }
  }
  for (let x = 0; x < N; x++) {
    for (let y = 0; y < N; y++) {
      r[y] = re2[y * N + x]!;
      i[y] = im2[y * N + x]!;
    }
    fft(r, i);
    for (let y = 0; y < N; y++) {
      re2[y * N + x] = r[y]!;
      im2[y * N + x] = i[y]!;
    }
  }
  // The band, one half-plane (a real image's spectrum is symmetric).
  const band: number[] = [];
  const fMin = N / MAX_PERIOD,
    fMax = N / MIN_PERIOD;
  for (let v = 0; v <= N / 2; v++) {
    for (let u = -N / 2 + 1; u <= N / 2; u++) {
      if (v === 0 && u <= 0) continue;
      const f = Math.hypot(u, v);
      if (f < fMin || f > fMax) continue;
      const k = v * N + ((u + N) % N);
      band.push(re2[k]! ** 2 + im2[k]! ** 2);
    }
  }
  if (band.length === 0) return null;
  const sorted = [...band].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  return median > 0 ? sorted[sorted.length - 1]! / median : null;
}
