/**
 * The attacks the footage evaluation builds on each recorded session (scripts/evaluate/footage.ts
 * writes them): which kinds, how many variants of each, and what each variant changes. Pure: the plan
 * is drawn from a seeded generator and the clip's measured frames, nothing is read or written here,
 * so the counts and the spread of the variants are tested without the footage
 * (test/evaluate-footage-attacks.test.ts).
 *
 * One variant per session gave 7 presentations per kind on the tuning clips: an APCER of 0 then bounds
 * nothing (95 % upper bound 35 %). Each kind now gets ceil(60 / sessions of the role) variants per
 * session, so that every kind reaches 60 presentations on each role (tuning clips, held-out clip).
 * Variant 0 of each kind is the one the first version wrote; the others move what an attacker or the
 * capture would: the still a warp or a print starts from, the steps and lights drawn, the poses shown,
 * the strength of a painted reflection, the moment of the clip replayed, the re-encoding.
 */
import type { LivenessStep } from '../../features/liveness/decision.js';
import { drawLights } from '../../features/liveness/light-response.js';
import { drawSteps, estimatePose } from '../../features/liveness/decision.js';
import type { ClipFrames, FootageSession } from './footage.js';

/** The attack kinds written from real footage (the synthesised set adds `repeated` and `jittered`). */
export const FOOTAGE_ATTACKS = [
  'photo_warp',
  'photo_warp_relit',
  'unlit_replay',
  'injected_reencoded',
  'replayed',
  'print_tilted',
  'screen_replay',
  'spliced',
  'out_of_order',
] as const;
export type FootageAttack = (typeof FOOTAGE_ATTACKS)[number];

/** Presentations of each kind a role's recorded set must reach: 0 accepted in 60 bounds APCER at 4.9 % (95 %). */
export const FOOTAGE_MIN_PRESENTATIONS = 60;

/** |yaw| under which a frame is at the centre pose (as the sessions are cut). */
export const CENTRE_YAW = 0.08;

/** The screen-to-room ratios a painted reflection is given (photo_warp_relit): from barely readable to strong. */
export const RELIT_K = { min: 0.1, max: 0.3 } as const;

export interface View {
  /** Degrees, as synthView and flatTilt take them. */
  yaw: number;
  pitch: number;
}

export interface AttackVariant {
  attack: FootageAttack;
  /** The recorded session it is built on (FootageSession.name). */
  session: string;
  /** 0: the variant written when there was one per session; 1 and up vary it. */
  variant: number;
  /** The steps the attacked session asks for (steps.txt). */
  steps: LivenessStep[];
  /** The colours the attacked session asks for (lights.txt), one per light frame. */
  lights: string[];
  /** photo_warp, photo_warp_relit, print_tilted: the clip frame the warp or the print is made from. */
  still?: number;
  /** photo_warp, photo_warp_relit, print_tilted: the pose of each pose frame (degrees). */
  views?: View[];
  /** photo_warp_relit, print_tilted: the reflection painted on (or, for paper, given by) the light frames. */
  k?: number;
  /** unlit_replay, screen_replay, replayed: frames of the clip this far from the session's (in the clip's frames). */
  offset?: number;
  /** injected_reencoded: JPEG quality, scale and pixels cropped from each side. */
  quality?: number;
  scale?: number;
  crop?: number;
  /** replayed: the one frame of the earlier session (pose frames, then light frames) sent again; null: all of them. */
  replayedFrame?: number | null;
  /** spliced: the pose frame replaced, the other person (an index into the intruders given) and the pose shown. */
  at?: number;
  intruder?: number;
  intruderView?: View;
  /** out_of_order: the steps asked are not the ones shown (`swapped`), the turn comes first (`peak_first`), or a step is asked the recording never shows (`extra_step`). */
  order?: 'swapped' | 'peak_first' | 'extra_step';
  /** Seed of what the variant draws when rendered (noise, framing, moiré). */
  seed: number;
}

/** Variants per session so that `sessions` sessions give each kind at least `min` presentations. */
export function variantsPerSession(sessions: number, min = FOOTAGE_MIN_PRESENTATIONS): number {
  return sessions > 0 ? Math.ceil(min / sessions) : 0;
}

/** The pose a person (or a warp of one) shows for a step, drawn as the synthesised bona fide are (degrees). */
export function viewFor(step: LivenessStep, r: () => number): View {
  const u = (a: number, b: number) => a + (b - a) * r();
  switch (step) {
    case 'center':
      return { yaw: u(-4, 4), pitch: u(-3, 3) };
    case 'turn_left':
      return { yaw: u(20, 32), pitch: u(-4, 4) };
    case 'turn_right':
      return { yaw: -u(20, 32), pitch: u(-4, 4) };
    case 'look_up':
      return { yaw: u(-4, 4), pitch: u(14, 24) };
  }
}

/** How a print is tilted to answer a step (degrees): 20 to 35° of yaw for a turn, 15 to 25° of pitch for a look up. */
export function tiltFor(step: LivenessStep, r: () => number): View {
  const u = (a: number, b: number) => a + (b - a) * r();
  return step === 'turn_left'
    ? { yaw: u(20, 35), pitch: 0 }
    : step === 'turn_right'
      ? { yaw: -u(20, 35), pitch: 0 }
      : step === 'look_up'
        ? { yaw: 0, pitch: u(15, 25) }
        : { yaw: 0, pitch: 0 };
}

/** One frame per step, and a return to the centre when that makes fewer than three (a session takes three or more). */
export function framesFor(steps: readonly LivenessStep[]): LivenessStep[] {
  return steps.length < 3 ? [...steps, 'center'] : [...steps];
}

/** The stills a warp or a print of this session may start from: centre frames within 3 s of its first, the nearest first. */
export function centreStills(cf: ClipFrames, s: FootageSession): number[] {
  const c = s.pose[0]!;
  const span = Math.round(3 * cf.fps);
  const out: number[] = [];
  for (let i = Math.max(0, c - span); i <= Math.min(cf.frames.length - 1, c + span); i++) {
    const f = cf.frames[i]!;
    if (f.outcome === 'face' && Math.abs(estimatePose(f.landmarks5).yaw) < CENTRE_YAW) out.push(i);
  }
  return out.sort((a, b) => Math.abs(a - c) - Math.abs(b - c) || a - b);
}

/** The frame `offset` frames from `i` with a face, searching further in the same direction; `i` itself when none is. */
export function shifted(cf: ClipFrames, i: number, offset: number): number {
  if (offset === 0) return i;
  const dir = Math.sign(offset);
  for (let j = i + offset; j >= 0 && j < cf.frames.length && Math.abs(j - i) <= Math.abs(offset) + 10; j += dir) if (cf.frames[j]!.outcome === 'face') return j;
  return i;
}

/** The v-th offset from a session's frames: 1, −1, 2, −2, ... (from 0: 0, 1, −1, 2, ...). */
export function alternating(v: number, first: 0 | 1 = 1): number {
  if (first === 0) return v === 0 ? 0 : alternating(v - 1, 1);
  return (v % 2 === 0 ? 1 : -1) * (1 + Math.floor(v / 2));
}

/** The index (in the pose frames) of the frame that shows the session's movement at its fullest. */
export function peakFrame(cf: ClipFrames, s: FootageSession): number {
  const turn = s.steps[1] !== 'look_up';
  let best = 0,
    bestValue = -Infinity;
  s.pose.forEach((i, k) => {
    const f = cf.frames[i]!;
    if (f.outcome !== 'face') return;
    const p = estimatePose(f.landmarks5);
    const v = turn ? Math.abs(p.yaw) : -p.pitch;
    if (v > bestValue) [best, bestValue] = [k, v];
  });
  return best;
}

const others = (step: LivenessStep): LivenessStep[] => (['turn_left', 'turn_right', 'look_up'] as LivenessStep[]).filter((s) => s !== step);

/**
 * The variants of every attack kind on the sessions of one role (all its clips), `perSession` of each
 * kind per session (default: enough for FOOTAGE_MIN_PRESENTATIONS). `sessionLights` are the colours
 * each session's bona fide light frames were lit by (variant 0 of the kinds that replay them keeps
 * them); `intruders` is how many other people's photos a splice may draw from.
 */
export function planFootageAttacks(
  role: ReadonlyArray<{ cf: ClipFrames; sessions: readonly FootageSession[] }>,
  sessionLights: ReadonlyMap<string, readonly string[]>,
  intruders: number,
  r: () => number,
  perSession = variantsPerSession(role.reduce((n, c) => n + c.sessions.length, 0)),
): AttackVariant[] {
  const out: AttackVariant[] = [];
  const int = (n: number) => Math.floor(r() * n);
  const seed = () => int(1e9);
  const spread = (v: number, a: number, b: number) => (perSession > 1 ? a + ((b - a) * v) / (perSession - 1) : a);
  for (const { cf, sessions } of role) {
    for (const s of sessions) {
      const recorded = [...(sessionLights.get(s.name) ?? drawLights(s.light.length, int))];
      const stills = centreStills(cf, s);
      // Spread over the stills, nearest first: variant 0 is the session's own centre frame.
      const still = (v: number) => (stills.length ? stills[Math.round(spread(v, 0, stills.length - 1))]! : s.pose[0]!);
      const newLights = () => drawLights(s.light.length, int);
      const peak = peakFrame(cf, s);
      for (let v = 0; v < perSession; v++) {
        const base = { session: s.name, variant: v };
        // Warps answer whatever is drawn (the attacker renders the steps asked); variant 0 the recorded steps.
        const drawn = v === 0 ? [...s.steps] : drawSteps(int);
        out.push({
          ...base,
          attack: 'photo_warp',
          steps: drawn,
          lights: v === 0 ? recorded : newLights(),
          still: still(v),
          views: framesFor(drawn).map((st) => viewFor(st, r)),
          k: 0,
          seed: seed(),
        });
        const drawnRelit = v === 0 ? [...s.steps] : drawSteps(int);
        out.push({
          ...base,
          attack: 'photo_warp_relit',
          steps: drawnRelit,
          lights: v === 0 ? recorded : newLights(),
          still: still(perSession - 1 - v),
          views: framesFor(drawnRelit).map((st) => viewFor(st, r)),
          // Variant 0 at the bona fide's own 0.15; the others across RELIT_K.
          k:
            v === 0
              ? 0.15
              : Math.round(1000 * (perSession > 2 ? RELIT_K.min + ((RELIT_K.max - RELIT_K.min) * (v - 1)) / (perSession - 2) : RELIT_K.min)) / 1000,
          seed: seed(),
        });
        const drawnPrint = v === 0 ? [...s.steps] : drawSteps(int);
        out.push({
          ...base,
          attack: 'print_tilted',
          steps: drawnPrint,
          lights: v === 0 ? recorded : newLights(),
          still: still(v),
          views: framesFor(drawnPrint).map((st) => tiltFor(st, r)),
          // Paper reflects the screen's light as skin does.
          k: 0.15,
          seed: seed(),
        });
        // Replays show what the person did: the steps recorded (the draw that favours the attacker).
        out.push({ ...base, attack: 'unlit_replay', steps: [...s.steps], lights: v === 0 ? recorded : newLights(), offset: alternating(v), seed: seed() });
        out.push({ ...base, attack: 'screen_replay', steps: [...s.steps], lights: v === 0 ? recorded : newLights(), offset: alternating(v, 0), seed: seed() });
        // The session itself, re-encoded: the recorded steps and lights (the worst case: a draw that
        // repeats both), variant 0 as first written (JPEG 75, 0.9, 3 px), the others across the ranges.
        out.push({
          ...base,
          attack: 'injected_reencoded',
          steps: [...s.steps],
          lights: recorded,
          quality: v === 0 ? 75 : Math.round(spread(v, 95, 50)),
          scale: v === 0 ? 0.9 : Math.round(100 * (0.7 + 0.3 * r())) / 100,
          crop: v === 0 ? 3 : int(9),
          seed: seed(),
        });
        const frames = s.pose.length + s.light.length;
        out.push({
          ...base,
          attack: 'replayed',
          steps: [...s.steps],
          lights: v === 0 ? recorded : newLights(),
          // Variant 0 sends every frame again; the others one of them among fresh frames of the clip.
          replayedFrame: v === 0 ? null : (v - 1) % frames,
          offset: 1,
          seed: seed(),
        });
        const poseFrames = s.pose.length;
        out.push({
          ...base,
          attack: 'spliced',
          steps: [...s.steps],
          lights: newLights(),
          at: 1 + (v % (poseFrames - 1)),
          intruder: v % Math.max(1, intruders),
          intruderView: 1 + (v % (poseFrames - 1)) === peak ? viewFor(s.steps[1]!, r) : viewFor('center', r),
          seed: seed(),
        });
        const order = (['swapped', 'peak_first', 'extra_step'] as const)[v % 3]!;
        const alt = others(s.steps[1]!);
        out.push({
          ...base,
          attack: 'out_of_order',
          steps:
            order === 'swapped'
              ? ['center', alt[Math.floor(v / 3) % 2]!]
              : order === 'extra_step'
                ? ['center', s.steps[1]!, alt[Math.floor(v / 3) % 2]!]
                : [...s.steps],
          lights: newLights(),
          order,
          seed: seed(),
        });
      }
    }
  }
  return out;
}

/** Presentations per kind of a plan. */
export function countByAttack(plan: readonly AttackVariant[]): Record<FootageAttack, number> {
  const out = Object.fromEntries(FOOTAGE_ATTACKS.map((a) => [a, 0])) as Record<FootageAttack, number>;
  for (const p of plan) out[p.attack]++;
  return out;
}
