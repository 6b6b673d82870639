/** The liveness wing's settings (`config.liveness`), composed into the configuration by its manifest. */
import { s, type Parsed, type WingSettingGroup } from '../../platform/config.js';
import { DEFAULT_LIGHT_JOB_FRAMES } from '../../platform/jobs/index.js';

export const LIVENESS_SETTINGS = {
  mode: s({
    env: 'LIVENESS_MODE',
    kind: 'string',
    default: (c: Parsed) => (c.runtime?.nodeEnv === 'production' ? 'challenge' : 'passive'),
    enum: ['passive', 'challenge'] as const,
    doc: '`passive`: verify-face and `/verify/self` accept a single capture (the passive model decides) or a passed liveness session; `challenge`: they require a passed session (`livenessSessionId`), and a plain capture is 422 `liveness_session_required` before any decode, without a SearchLog row. Default: `challenge` in production (a single capture proves no presence: a photo of a photo passes a passive model often enough), `passive` elsewhere; `passive` in production only when set, and then warned about at every start. The mode in force is the metric `faceid_liveness_mode{mode}`.',
  }),
  sessionTtlSeconds: s({
    env: 'LIVENESS_SESSION_TTL_SECONDS',
    kind: 'int',
    default: 60,
    min: 5,
    max: 3600,
    doc: 'Lifetime of a liveness session: its frames must arrive, and a passed session must be used, within this long of its creation.',
  }),
  sessionsPerHour: s({
    env: 'LIVENESS_SESSIONS_PER_HOUR',
    kind: 'int',
    default: 30,
    min: 1,
    doc: 'Liveness sessions one principal (consumer or operator) may create per hour; beyond it 429 `rate_limited` with Retry-After.',
  }),
  minFrames: s({
    env: 'LIVENESS_MIN_FRAMES',
    kind: 'int',
    default: 3,
    min: 2,
    max: 16,
    doc: 'Fewest frames a liveness session takes (`minFrames` of the session).',
  }),
  maxFrames: s({
    env: 'LIVENESS_MAX_FRAMES',
    kind: 'int',
    default: (c: Parsed) => Math.max(8, Number(c.liveness?.minFrames ?? 3)),
    min: 2,
    max: 16,
    doc: 'Most frames a liveness session takes (`maxFrames` of the session); at least LIVENESS_MIN_FRAMES.',
  }),
  replayWindowSeconds: s({
    env: 'LIVENESS_REPLAY_WINDOW_SECONDS',
    kind: 'int',
    default: 30 * 86_400,
    min: 60,
    doc: 'How long the keyed digest of every frame received is remembered: a frame whose exact bytes come again within this window fails its session with `replayed_frames`. Digests only (HMAC under the biometric key ring), never the frames.',
  }),
  nearReplayWindowSeconds: s({
    env: 'LIVENESS_NEAR_REPLAY_WINDOW_SECONDS',
    kind: 'int',
    default: 30 * 86_400,
    min: 0,
    doc: "How long a keyed sketch of every frame's face is remembered (features/liveness/frame-sketch.ts): a session with one frame (pose or light) that is a near copy (re-encoded, rescaled, recropped by a few pixels, noised: new bytes, the same pixels) of a frame of an earlier session, any principal's, within this window fails with `replayed_frames`. 0 turns the check off (a client that sends the same pictures again with new bytes, such as a test harness re-using its photos, needs that; a camera never does). Keyed digests of bands of the sketch only, never the frames; about 3 KB of Redis per frame for the window.",
  }),
  light: s({
    env: 'LIVENESS_LIGHT',
    kind: 'string',
    default: 'required',
    enum: ['required', 'off'] as const,
    doc: '`required`: every liveness session draws a screen-light sequence (`lights`, 6 to 8 colours) and its frames call must bring one `lightFrames` part per colour, each captured while the screen shows it, whose face colour follows the sequence (`light_not_followed` otherwise): a recording or a warped photo made before the session cannot. `off`: sessions carry no `lights` nor `lightHoldMs` and the frames call takes no `lightFrames` (clients that cannot light the face).',
  }),
  lightHoldMs: s({
    env: 'LIVENESS_LIGHT_HOLD_MS',
    kind: 'int',
    default: 450,
    // Never more than three colour changes a second: WCAG 2.3.1's flash threshold (a person with
    // photosensitive epilepsy may take the check).
    min: 334,
    max: 5000,
    doc: "How long the client shows each colour of a session's light sequence (`lightHoldMs` of the session): long enough for the camera's exposure to settle under it before the frame is taken. At least 334: never more than three colour changes a second (WCAG 2.3.1, three flashes). Not judged by the server beyond LIVENESS_MIN_STEP_MS.",
  }),
  minStepMs: s({
    env: 'LIVENESS_MIN_STEP_MS',
    kind: 'int',
    default: 500,
    min: 0,
    max: 10_000,
    doc: 'Least time a person needs to read a prompt and move to the next pose (ms). A session whose frames arrive sooner after its creation than this per step after the first, or whose claimed capture times (`capturedAt`) cover less than that or more than the server saw, fails with `implausible_timing`.',
  }),
  lightJobFrames: s({
    env: 'LIVENESS_LIGHT_JOB_FRAMES',
    kind: 'int',
    default: DEFAULT_LIGHT_JOB_FRAMES,
    min: 1,
    max: 8,
    doc: 'Most light frames in one `light` job: a session\'s 6 to 8 light frames go as that many jobs, of even sizes, which the face processes take in parallel (each job detects the face on its first frame and follows it on the others; every frame\'s face is embedded wherever it runs). 4: two jobs, one per face process of a two-core host (docs/performance.md, "The light frames shared by the face processes"); 8: one job. Lower it where more face processes serve the `light` queue.',
  }),
} as const;

declare module '../../platform/config.js' {
  interface WingSettings {
    liveness: typeof LIVENESS_SETTINGS;
  }
}

export const livenessSettingGroups: Record<string, WingSettingGroup> = {
  liveness: { title: 'Liveness sessions (challenge over several frames)', settings: LIVENESS_SETTINGS },
};
