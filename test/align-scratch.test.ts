/**
 * The detector's reused buffers (align.ts `rowScratch`, `into`) give the values fresh arrays give, and
 * the fast separable resample gives, bit for bit, what its plain loops give.
 */
import test from 'ava';
import { cropResize, toPlanar, type Rect, type WarpOptions } from '../features/face/worker/pipeline/align.js';

function image(width: number, height: number, seed: number) {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761 + seed * 97) % 251;
  return { data, width, height };
}

test('cropResize into a dirty buffer, after calls on other sizes, equals cropResize into a fresh one', (t) => {
  const opts = { border: { fill: 117 }, antialias: true } as const;
  const cases = [
    { img: image(1280, 853, 1), rect: { x: 0, y: -213.5, w: 1280, h: 1280 } }, // letterboxed: fill rows
    { img: image(300, 420, 2), rect: { x: -40, y: -10, w: 380, h: 380 } }, // past every edge
    { img: image(1280, 853, 3), rect: { x: 100, y: 50, w: 700, h: 700 } }, // inside, after a larger row scratch
  ];
  const into = new Float32Array(64 * 48 * 3);
  for (const { img, rect } of cases) {
    const fresh = cropResize(img, rect, 64, 48, opts);
    into.fill(Number.NaN); // what a previous pass left is never read
    const reused = cropResize(img, rect, 64, 48, opts, into);
    t.is(reused, into);
    t.deepEqual(Array.from(reused), Array.from(fresh));
  }
  t.throws(() => cropResize(cases[0]!.img, cases[0]!.rect, 64, 48, opts, new Float32Array(10)), { instanceOf: RangeError });
});

test('toPlanar into a dirty buffer equals toPlanar into a fresh one', (t) => {
  const rgb = Float32Array.from({ length: 8 * 6 * 3 }, (_, i) => (i * 37) % 256);
  const into = new Float32Array(8 * 6 * 3).fill(Number.NaN);
  t.deepEqual(Array.from(toPlanar(rgb, 8, 6, 127.5, 128, into)), Array.from(toPlanar(rgb, 8, 6, 127.5, 128)));
});

/**
 * The separable resample as plain loops (rows, then columns; each output's vertical taps added to the
 * Float32Array one by one): the specification `cropResize` is fast against. The taps are the same
 * sampling as warpAffine's (n x n bilinear samples, merged where neighbours share a source pixel).
 */
function plainCropResize(img: { data: Uint8Array; width: number; height: number }, rect: Rect, outW: number, outH: number, opts: WarpOptions): Float32Array {
  const replicate = opts.border === 'replicate';
  const fillValue = opts.border === 'replicate' ? 0 : opts.border.fill;
  const taps = (srcSize: number, outSize: number, step: number, offset: number) => {
    const n = opts.antialias ? Math.max(1, Math.min(4, Math.ceil(step - 1e-6))) : 1;
    const perOut: { idx: number[]; w: number[]; fill: number }[] = [];
    for (let u = 0; u < outSize; u++) {
      const idx: number[] = [];
      const w: number[] = [];
      let fill = 0;
      for (let k = 0; k < n; k++) {
        const x = step * (u + (k + 0.5) / n) + offset - 0.5;
        const x0 = Math.floor(x);
        const f = x - x0;
        for (let side = 0; side < 2; side++) {
          let i = x0 + side;
          const wt = side === 0 ? (1 - f) / n : f / n;
          if (wt === 0) continue;
          if (i < 0 || i > srcSize - 1) {
            if (!replicate) {
              fill = Math.fround(fill + wt);
              continue;
            }
            i = i < 0 ? 0 : srcSize - 1;
          }
          if (idx.length && idx[idx.length - 1] === i) w[w.length - 1] = Math.fround(w[w.length - 1]! + wt);
          else {
            idx.push(i);
            w.push(Math.fround(wt));
          }
        }
      }
      perOut.push({ idx, w, fill });
    }
    return perOut;
  };
  const tx = taps(img.width, outW, rect.w / outW, rect.x);
  const ty = taps(img.height, outH, rect.h / outH, rect.y);
  const tmp = new Float32Array(img.height * outW * 3);
  for (let r = 0; r < img.height; r++)
    for (let u = 0; u < outW; u++)
      for (let c = 0; c < 3; c++) {
        let acc = tx[u]!.fill * fillValue;
        tx[u]!.idx.forEach((i, j) => (acc += img.data[(r * img.width + i) * 3 + c]! * tx[u]!.w[j]!));
        tmp[(r * outW + u) * 3 + c] = acc;
      }
  const out = new Float32Array(outW * outH * 3);
  for (let v = 0; v < outH; v++)
    for (let i = 0; i < outW * 3; i++) {
      out[v * outW * 3 + i] = ty[v]!.fill * fillValue;
      ty[v]!.idx.forEach((r, j) => (out[v * outW * 3 + i] = out[v * outW * 3 + i]! + tmp[r * outW * 3 + i]! * ty[v]!.w[j]!));
    }
  return out;
}

test('cropResize gives bit for bit what the plain loops give: any rectangle, scale, border and tap count', (t) => {
  let seed = 7;
  const rand = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  const images = [image(97, 131, 4), image(640, 480, 5), image(300, 300, 6)];
  let cases = 0;
  for (const img of images)
    for (let c = 0; c < 60; c++) {
      // Sizes from enlargements to 10x reductions (up to eight taps an output), rectangles inside and past the edges.
      const outW = 8 + Math.floor(rand() * 120),
        outH = 8 + Math.floor(rand() * 120);
      const rect = { x: -30 + rand() * img.width * 0.8, y: -30 + rand() * img.height * 0.8, w: 5 + rand() * img.width * 1.5, h: 5 + rand() * img.height * 1.5 };
      const opts: WarpOptions = { border: rand() < 0.5 ? 'replicate' : { fill: Math.floor(rand() * 256) }, antialias: rand() < 0.8 };
      const fast = cropResize(img, rect, outW, outH, opts);
      const plain = plainCropResize(img, rect, outW, outH, opts);
      if (!Buffer.from(fast.buffer, fast.byteOffset, fast.byteLength).equals(Buffer.from(plain.buffer)))
        t.fail(`differs: ${JSON.stringify({ rect, outW, outH, opts })}`);
      cases++;
    }
  t.is(cases, 180);
});
