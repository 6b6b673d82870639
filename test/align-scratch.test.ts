/** The detector's reused buffers (align.ts `rowScratch`, `into`) give the values fresh arrays give. */
import test from 'ava';
import { cropResize, toPlanar } from '../features/face/worker/pipeline/align.js';

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
