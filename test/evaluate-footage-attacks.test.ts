/**
 * The attacks `npm run evaluate -- liveness-footage` builds on real footage (scripts/evaluate/footage-attacks.ts):
 * every kind reaches 60 presentations per role, and the variants of one session differ in what they vary.
 * Pure: sessions and frames are made up here, no footage, no engine.
 */
import test from 'ava';
import type { LivenessStep } from '../features/liveness/decision.js';
import {
  alternating,
  centreStills,
  countByAttack,
  FOOTAGE_ATTACKS,
  FOOTAGE_MIN_PRESENTATIONS,
  planFootageAttacks,
  RELIT_K,
  variantsPerSession,
} from '../scripts/evaluate/footage-attacks.js';
import type { ClipFrames, FootageSession, MeasuredFrame } from '../scripts/evaluate/footage.js';
import { rng } from '../scripts/evaluate/liveness-views.js';

/** A face whose nose sits `yaw` inter-ocular distances off the midline (estimatePose reads it back). */
const faceAt = (file: string, yaw: number): MeasuredFrame => ({
  file,
  outcome: 'face',
  box: [20, 20, 60, 80],
  landmarks5: [
    [40, 50],
    [60, 50],
    [50 + 20 * yaw, 62],
    [42, 72],
    [58, 72],
  ],
  livenessScore: 0.6,
});

/** A clip of `n` frames at 10 per second: the face at the centre, turned at each session's peak. */
function clip(name: string, role: 'tune' | 'heldout', n: number, sessions: number): { cf: ClipFrames; sessions: FootageSession[] } {
  const out: FootageSession[] = [];
  const peaks = new Set<number>();
  for (let k = 0; k < sessions; k++) {
    const c = 30 + k * 60;
    const step: LivenessStep = k % 3 === 2 ? 'look_up' : k % 2 ? 'turn_right' : 'turn_left';
    peaks.add(c + 10);
    out.push({
      clip: name,
      name: `${name}-${c + 10}-${step}`,
      steps: ['center', step],
      pose: [c, c + 10, c + 20],
      light: Array.from({ length: 6 + (k % 3) }, (_, j) => c + 25 + 5 * j),
    });
  }
  const frames = Array.from({ length: n }, (_, i) =>
    i % 37 === 36 ? ({ file: `${i}.jpg`, outcome: 'no_face' } as const) : faceAt(`${i}.jpg`, peaks.has(i) ? 0.2 : 0),
  );
  return { cf: { clip: { name, file: `${name}.mp4`, fps: 10, role }, dir: '.', fps: 10, frames }, sessions: out };
}

const tuning = () => [clip('a', 'tune', 5 * 60 + 80, 5), clip('b', 'tune', 2 * 60 + 80, 2)];
const heldOut = () => [clip('h', 'heldout', 4 * 60 + 80, 4)];
const lightsOf = (role: ReturnType<typeof tuning>) => new Map(role.flatMap((c) => c.sessions.map((s) => [s.name, s.light.map(() => '#FF0000')] as const)));

test('every attack kind built from footage reaches 60 presentations on the 7 tuning sessions and on the 4 held-out ones', (t) => {
  // The kinds: print and screen replay are print_tilted and screen_replay here.
  for (const kind of ['photo_warp', 'unlit_replay', 'injected_reencoded', 'replayed', 'print_tilted', 'screen_replay', 'spliced', 'out_of_order'])
    t.true((FOOTAGE_ATTACKS as readonly string[]).includes(kind), kind);
  for (const [role, perSession] of [
    [tuning(), 9],
    [heldOut(), 15],
  ] as const) {
    const plan = planFootageAttacks(role, lightsOf(role), 7, rng(1));
    const counts = countByAttack(plan);
    for (const kind of FOOTAGE_ATTACKS) t.true(counts[kind] >= FOOTAGE_MIN_PRESENTATIONS, `${kind}: ${counts[kind]}`);
    const sessions = role.reduce((n, c) => n + c.sessions.length, 0);
    t.is(variantsPerSession(sessions), perSession);
    for (const kind of FOOTAGE_ATTACKS) t.is(counts[kind], sessions * perSession);
  }
  t.is(variantsPerSession(60), 1);
  t.is(variantsPerSession(0), 0);
});

test('the variants of one session differ: stills, reflection strengths, moments replayed, re-encodings, frames replayed, splices and orders', (t) => {
  const role = tuning();
  const plan = planFootageAttacks(role, lightsOf(role), 7, rng(2));
  const s = role[0]!.sessions[0]!;
  const of = (kind: string) => plan.filter((p) => p.session === s.name && p.attack === kind);
  // No two variants of a kind alike once the seed is set aside.
  for (const kind of FOOTAGE_ATTACKS) {
    const keys = of(kind).map(({ seed: _seed, variant: _variant, ...rest }) => JSON.stringify(rest));
    t.is(new Set(keys).size, keys.length, kind);
  }
  // Variant 0 warps the session's own centre frame; the others start from other centre frames nearby.
  const warps = of('photo_warp');
  t.is(warps[0]!.still, s.pose[0]);
  t.true(new Set(warps.map((w) => w.still)).size >= 5);
  t.deepEqual(warps[0]!.steps, s.steps);
  for (const w of [...warps, ...of('print_tilted')]) t.is(w.views!.length, Math.max(3, w.steps.length));
  // Every still is a centre frame within 3 s of the session (the frames without a face are never one).
  const stills = centreStills(role[0]!.cf, s);
  t.true(warps.every((w) => stills.includes(w.still!)));
  t.false(stills.some((i) => i % 37 === 36));
  // Painted reflections from 0.10 to 0.30 (variant 0 at the bona fide's 0.15).
  const ks = of('photo_warp_relit').map((w) => w.k!);
  t.is(ks[0], 0.15);
  t.true(Math.min(...ks) <= RELIT_K.min + 1e-9 && Math.max(...ks) >= RELIT_K.max - 1e-9, ks.join(' '));
  t.deepEqual(
    of('unlit_replay').map((w) => w.offset),
    [1, -1, 2, -2, 3, -3, 4, -4, 5],
  );
  t.is(of('screen_replay')[0]!.offset, 0);
  t.deepEqual(
    [0, 1, 2, 3].map((v) => alternating(v, 0)),
    [0, 1, -1, 2],
  );
  // The re-encodings: variant 0 as first written, the others across qualities, scales and crops.
  const inj = of('injected_reencoded');
  t.like(inj[0], { quality: 75, scale: 0.9, crop: 3 });
  t.true(new Set(inj.map((w) => w.quality)).size === inj.length && inj.every((w) => w.quality! >= 50 && w.quality! <= 95));
  t.true(inj.every((w) => w.scale! >= 0.7 && w.scale! <= 1 && w.crop! >= 0 && w.crop! <= 8));
  // Replayed: all the frames, then each frame of the session (pose, then light) alone.
  const rep = of('replayed');
  t.is(rep[0]!.replayedFrame, null);
  t.deepEqual(
    rep.slice(1).map((w) => w.replayedFrame),
    [0, 1, 2, 3, 4, 5, 6, 7],
  );
  // Spliced: never the first frame; the other person changes.
  const sp = of('spliced');
  t.true(sp.every((w) => w.at! >= 1 && w.at! < s.pose.length));
  t.true(new Set(sp.map((w) => w.intruder)).size >= 5);
  // Out of order: the steps asked are not those shown, or the turn comes first.
  for (const w of of('out_of_order')) {
    if (w.order === 'peak_first') t.deepEqual(w.steps, s.steps);
    else t.notDeepEqual(w.steps, s.steps);
    if (w.order === 'swapped') t.not(w.steps[1], s.steps[1]);
    if (w.order === 'extra_step') t.is(w.steps.length, 3);
  }
  // Lights have one colour per light frame, whatever the variant.
  t.true(plan.every((p) => p.lights.length === role.flatMap((c) => c.sessions).find((x) => x.name === p.session)!.light.length));
});

test('the plan is drawn from the generator given: the same seed, the same plan', (t) => {
  const role = tuning();
  t.deepEqual(planFootageAttacks(role, lightsOf(role), 7, rng(3)), planFootageAttacks(role, lightsOf(role), 7, rng(3)));
  t.notDeepEqual(planFootageAttacks(role, lightsOf(role), 7, rng(3)), planFootageAttacks(role, lightsOf(role), 7, rng(4)));
});
