/**
 * Capture quality on the real pipeline: the fixture photos as they are, and copies degraded with
 * sharp (scripts/quality-degradations.ts, the same functions that make the table in
 * docs/face-engine.md). Each degradation raises its issue from its documented level on; the
 * undegraded photos raise none, except the two whose head really is turned (documented below).
 */
import test from 'ava';
import path from 'node:path';
import { FaceEngine } from '../../features/face/worker/pipeline/engine.js';
import { normaliseUpload } from '../../platform/face/image.js';
import { component, QUALITY_RANGES } from '../../features/face/worker/pipeline/quality.js';
import { QUALITY_ISSUES } from '../../platform/face/quality.js';
import { DEGRADATIONS, CLEAN_PHOTOS, ROOT_DIR, analyse, fixture, geometry, type FaceGeometry } from '../../scripts/quality-degradations.js';

const MODELS = path.resolve(ROOT_DIR, process.env.FACE_MODELS_DIR ?? 'var/models');

/**
 * Fixture photos whose undegraded capture legitimately raises issues: LFW Powell_2 is a three-quarter
 * view (yaw about 54 degrees; its two pairs are the lowest genuine scores of the set, 0.514 and 0.542),
 * and the largest face of group sample2 is a profile lit by a window (yaw about 58 degrees, eyes
 * turned away, 21% of the face clipped white).
 */
const EXPECTED_CLEAN_ISSUES: Record<string, string[]> = {
  'lfw/Powell_2.png': ['not_frontal'],
  'group/sample2.jpg': ['not_frontal', 'eyes_not_visible', 'too_bright'],
};

/** The level from which each degradation raises its issue on every probe (docs/face-engine.md). */
const RAISES_FROM: Record<string, number> = {
  'gaussian blur': 2,
  darkening: 0.25,
  'over-exposure': 1.6,
  downscaling: 16,
  'crop cutting the face': 0.3,
  'in-plane rotation': 30,
  'eyes covered (dark band)': 0.25,
};

/** Frontal, undegraded-clean probes of three kinds: LFW close-ups, a 512 px portrait, a colour portrait. */
const PROBES = ['lfw/Bush_1.png', 'lfw/Powell_1.png', 'grace_hopper_a.jpg', 'astronaut.png'];

let engine: FaceEngine;
const geo = new Map<string, FaceGeometry>();

test.before(async () => {
  engine = await FaceEngine.load(MODELS);
  for (const p of PROBES) geo.set(p, await geometry(engine, fixture(p)));
});
test.after.always(async () => {
  await engine?.release();
});

test('undegraded fixture photos raise no issue (two documented exceptions with a turned head)', async (t) => {
  for (const file of CLEAN_PHOTOS) {
    const a = await analyse(engine, fixture(file));
    t.truthy(a, file);
    t.deepEqual(a!.quality.issues, EXPECTED_CLEAN_ISSUES[file] ?? [], `${file}: ${JSON.stringify(a!.quality.measures)}`);
    t.is(a!.quality.score >= 50, a!.quality.issues.length === 0, `${file}: score ${a!.quality.score} agrees with its issues`);
  }
});

for (const d of DEGRADATIONS) {
  test(`${d.kind} raises ${d.issue} at its documented onset, level ${RAISES_FROM[d.kind]} (${d.unit})`, async (t) => {
    const level = RAISES_FROM[d.kind]!;
    t.true(d.levels.includes(level), 'the documented level is one of the table levels');
    for (const p of PROBES) {
      const a = await analyse(engine, await d.apply(fixture(p), geo.get(p)!, level));
      t.truthy(a, `${p}: the face is still found at level ${level}`);
      t.true(a!.quality.issues.includes(d.issue), `${p} at ${level}: ${JSON.stringify(a!.quality)}`);
      t.true(a!.quality.score < 50, `${p} at ${level}: score ${a!.quality.score}`);
    }
  });
}

test('issues come from the fixed list, in its order; the score is 0..100', async (t) => {
  const blurred = await DEGRADATIONS.find((d) => d.kind === 'gaussian blur')!.apply(fixture('astronaut.png'), geo.get('astronaut.png')!, 4);
  const dark = await DEGRADATIONS.find((d) => d.kind === 'darkening')!.apply(blurred, geo.get('astronaut.png')!, 0.18);
  const a = await analyse(engine, dark);
  t.truthy(a);
  const { issues, score } = a!.quality;
  t.true(issues.includes('blurred') && issues.includes('too_dark'), JSON.stringify(issues));
  t.deepEqual(
    issues,
    QUALITY_ISSUES.filter((i) => issues.includes(i)),
  );
  t.true(Number.isInteger(score) && score >= 0 && score < 50);
});

test('the liveness stage returns quality unless asked not to; the rest of its answer is unchanged', async (t) => {
  const { jpeg } = await normaliseUpload(fixture('grace_hopper_a.jpg'));
  const withQ = await engine.liveness(jpeg, 'single');
  const without = await engine.liveness(jpeg, 'single', { quality: false });
  t.truthy(withQ.quality);
  t.is(without.quality, undefined);
  t.deepEqual(withQ.face, without.face);
  t.is(withQ.livenessScore, without.livenessScore);
});

test('component: 1 at the good end, 0.5 at the issue limit, 0 at the bad end, both directions', (t) => {
  const ied = QUALITY_RANGES.interEyeDistancePx; // higher is better
  t.is(component(100, ied), 1);
  t.is(component(ied.issueAt, ied), 0.5);
  t.is(component(ied.badAt, ied), 0);
  t.true(component(ied.issueAt - 1, ied) < 0.5 && component(ied.issueAt + 1, ied) > 0.5);
  const roll = QUALITY_RANGES.rollDeg; // lower is better
  t.is(component(0, roll), 1);
  t.is(component(roll.issueAt, roll), 0.5);
  t.is(component(90, roll), 0);
  t.is(component(Number.NaN, roll), 0);
});
