import test from 'ava';
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { drawLights, judgeLightResponse, LIGHT_COLOURS, LIGHT_THRESHOLDS, sampleLightFrame, type LightSample } from '../../features/liveness/light-response.js';
import { decodeRgb, rng, type Rgb } from '../../scripts/evaluate/liveness-views.js';
import { addNoise, relight } from '../../scripts/evaluate/light-sim.js';
import { FIXTURES_DIR } from '../fixtures/faces/labels.js';

// The detector's box of grace_hopper_a.jpg (fr_detect, [x, y, w, h]), a real face on a real backdrop.
const HOPPER_BOX: [number, number, number, number] = [176.4, 113.4, 178.6, 197.5];
let hopper: Rgb;
test.before(async () => {
  hopper = await decodeRgb(readFileSync(path.join(FIXTURES_DIR, 'grace_hopper_a.jpg')));
});

/** Light frames of the photo under `shown`, each with its own sensor noise and optional exposure gain. */
function lightFrames(shown: readonly string[], k: number, seed: number, gain?: (i: number) => [number, number, number]): LightSample[] {
  const r = rng(seed);
  return shown.map((c, i) => sampleLightFrame(addNoise(relight(hopper, HOPPER_BOX, c, { k, ...(gain ? { gain: gain(i) } : {}) }), 3, r), HOPPER_BOX));
}

test('the colours are the seven of SPEC 14.1', (t) => {
  t.deepEqual([...LIGHT_COLOURS], ['#FF0000', '#00FF00', '#0000FF', '#FFFF00', '#FF00FF', '#00FFFF', '#FFFFFF']);
});

test('drawLights never repeats a colour twice in a row, reaches every colour and every successor', (t) => {
  const r = rng(7);
  const randomInt = (n: number) => Math.floor(r() * n);
  const firsts = new Map<string, number>();
  const pairs = new Set<string>();
  for (let k = 0; k < 7000; k++) {
    const lights = drawLights(6 + (k % 3), randomInt);
    t.is(lights.length, 6 + (k % 3));
    firsts.set(lights[0]!, (firsts.get(lights[0]!) ?? 0) + 1);
    for (let i = 1; i < lights.length; i++) {
      if (lights[i] === lights[i - 1]) return t.fail(`repeat in ${lights.join(' ')}`);
      pairs.add(`${lights[i - 1]}>${lights[i]}`);
    }
    for (const l of lights) t.true(LIGHT_COLOURS.includes(l));
  }
  t.is(pairs.size, 42, 'every ordered pair of different colours occurs');
  for (const n of firsts.values()) t.true(n > 850 && n < 1150, `first colour drawn ${n} times of 7000 (uniform: 1000)`);
  t.throws(() => drawLights(0, randomInt), { instanceOf: RangeError });
});

test('sampleLightFrame: the skin inside the box against the room beside and above it, not the torso below', (t) => {
  const width = 200,
    height = 200;
  const data = new Uint8Array(width * height * 3);
  const box: [number, number, number, number] = [70, 40, 60, 80];
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const p = (y * width + x) * 3;
      const inBox = x >= 70 && x < 130 && y >= 40 && y < 120;
      const rgb = inBox ? [200, 120, 90] : y >= 120 ? [255, 255, 255] : [30, 60, 90];
      data.set(rgb, p);
    }
  const s = sampleLightFrame({ data, width, height }, box);
  const lin = (v: number) => 255 * ((v / 255 + 0.055) / 1.055) ** 2.4;
  for (let c = 0; c < 3; c++) {
    t.true(Math.abs(s.face[c]! - lin([200, 120, 90][c]!)) < 1e-6, `face channel ${c}`);
    t.true(Math.abs(s.background[c]! - lin([30, 60, 90][c]!)) < 1e-6, `background channel ${c}`);
  }
});

test('a real face lit by the session colours follows them; unlit, it is too weak to read', (t) => {
  const lights = ['#FF0000', '#00FFFF', '#FFFFFF', '#0000FF', '#FFFF00', '#00FF00', '#FF00FF'];
  const lit = judgeLightResponse(lights, lightFrames(lights, 0.15, 1));
  t.true(lit.followed, JSON.stringify(lit));
  t.true(lit.correlation > 0.9, `correlation ${lit.correlation}`);
  // The face's lit channel rose 15 %, the background's 1.5 %: ln(1.15) − ln(1.015) ≈ 0.125.
  t.true(lit.strength > 0.09 && lit.strength < 0.15, `strength ${lit.strength}`);
  const unlit = judgeLightResponse(lights, lightFrames(lights, 0, 2));
  t.false(unlit.followed);
  t.is(unlit.why, 'weak');
});

test('exposure and a lamp moving face and room together cancel', (t) => {
  const lights = ['#FF00FF', '#00FF00', '#0000FF', '#FF0000', '#FFFFFF', '#00FFFF'];
  const r = rng(3);
  // Every frame its own exposure (±30 %) and colour cast (±15 % per channel), far more than the response.
  const gain = (): [number, number, number] => {
    const e = 0.7 + 0.6 * r();
    return [e * (0.85 + 0.3 * r()), e * (0.85 + 0.3 * r()), e * (0.85 + 0.3 * r())];
  };
  const lit = judgeLightResponse(lights, lightFrames(lights, 0.1, 4, gain));
  t.true(lit.followed, JSON.stringify(lit));
  const unlit = judgeLightResponse(lights, lightFrames(lights, 0, 5, gain));
  t.false(unlit.followed, JSON.stringify(unlit));
});

test('a face that followed another sequence is uncorrelated; missing frames and faces are named', (t) => {
  const asked = ['#FF0000', '#00FF00', '#0000FF', '#FF0000', '#00FF00', '#0000FF'];
  const other = ['#0000FF', '#FF0000', '#00FF00', '#0000FF', '#FF0000', '#00FF00'];
  const v = judgeLightResponse(asked, lightFrames(other, 0.15, 6));
  t.false(v.followed);
  t.is(v.why, 'uncorrelated');
  t.true(v.correlation < LIGHT_THRESHOLDS.minCorrelation);

  const samples = lightFrames(asked, 0.15, 8);
  t.true(judgeLightResponse(asked, samples).followed);
  t.is(judgeLightResponse(asked, samples.slice(1)).why, 'count');
  t.is(judgeLightResponse(asked, [...samples, samples[0]!]).why, 'count');
  t.is(judgeLightResponse(asked, [...samples.slice(0, 5), null]).why, 'no_face');
});
