/** Liveness sessions (SPEC 13.1): create one, then give it its frames once. */
import { Type } from '@sinclair/typebox';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { Strict } from '../../platform/http/schemas.js';
import { FAILURE_REASONS, LIVENESS_STEPS } from './decision.js';
import { MAX_LIGHT_FRAMES, type LivenessService } from './service.js';

const TAG = 'Liveness';
const Step = Type.Union(LIVENESS_STEPS.map((s) => Type.Literal(s)));

const Colour = Type.String({ pattern: '^#[0-9A-F]{6}$' });

const CreatedBody = Type.Object({
  session: Type.Object({
    id: Type.String({ format: 'uuid' }),
    steps: Type.Array(Step, {
      minItems: 2,
      maxItems: 4,
      description:
        'What to show, in order, first `center`. `turn_left`/`turn_right`: turn the head to your own left/right (in the captured, unmirrored image the nose moves towards the right/left edge); `look_up`: tilt the head back.',
    }),
    lights: Type.Optional(
      Type.Array(Colour, {
        minItems: 6,
        maxItems: 8,
        description:
          'The screen-light sequence, drawn by the server for each session (`#RRGGBB` from #FF0000, #00FF00, #0000FF, #FFFF00, #FF00FF, #00FFFF, #FFFFFF, never the same twice in a row): show each colour over most of the screen for `lightHoldMs`, the face at the `center` pose, and capture one frame under each (`lightFrames`, in this order). Absent under LIVENESS_LIGHT=off, as `lightHoldMs`.',
      }),
    ),
    lightHoldMs: Type.Optional(
      Type.Integer({ description: 'How long to show each colour before its frame is captured (ms; LIVENESS_LIGHT_HOLD_MS). Absent without `lights`.' }),
    ),
    expiresAt: Type.String({
      format: 'date-time',
      description: 'The frames must arrive, and a passed session be used, before this (LIVENESS_SESSION_TTL_SECONDS)',
    }),
    minFrames: Type.Integer({ description: 'LIVENESS_MIN_FRAMES' }),
    maxFrames: Type.Integer({ description: 'LIVENESS_MAX_FRAMES' }),
  }),
});

const JudgedBody = Type.Object({
  session: Type.Object({
    id: Type.String({ format: 'uuid' }),
    status: Type.Union([Type.Literal('passed'), Type.Literal('failed')]),
    reason: Type.Optional(
      Type.Union(
        FAILURE_REASONS.map((r) => Type.Literal(r)),
        { description: 'Why it failed: the first reason found, checked in the order listed' },
      ),
    ),
    stepsSeen: Type.Array(Type.Union([Step, Type.Null()]), { description: 'Per frame, the step the server saw in it, or null' }),
  }),
});

export default function livenessRoutes({ config, liveness }: { config: Config; liveness: LivenessService }): AnyRoute[] {
  const light = config.liveness.light === 'required';
  return [
    route({
      method: 'POST',
      path: '/liveness/sessions',
      operationId: 'createLivenessSession',
      tag: TAG,
      summary: 'Start a liveness session: server-random steps to perform in front of the camera',
      description:
        "The steps (2 to 4, first `center`) and, under LIVENESS_LIGHT=required (the default), the light sequence (6 to 8 colours) are drawn by the server for each session. The session belongs to the caller, lives LIVENESS_SESSION_TTL_SECONDS and takes its frames once. Creating a session ends the caller's earlier sessions that have had no frames call (their frames call then answers `session_expired`). At most LIVENESS_SESSIONS_PER_HOUR sessions per caller per hour (429 `rate_limited` with Retry-After).",
      auth: 'consumer-or-operator',
      body: Type.Object({}, Strict),
      responses: { 201: { description: 'The session', schema: CreatedBody } },
      errors: ['rate_limited'],
      handler: async function createLivenessSession({ auth }) {
        return { status: 201, body: await liveness.create(auth) };
      },
    }),
    route({
      method: 'POST',
      path: '/liveness/sessions/{id}/frames',
      operationId: 'submitLivenessFrames',
      tag: TAG,
      summary: "Give a liveness session its frames (once) and get the server's verdict",
      description:
        'The file field `frames` repeated `minFrames` to `maxFrames` times, in capture order, and (a session with `lights`) the file field `lightFrames` once per light, in the order of `lights` (JPEG, PNG or WebP each). ' +
        "Answered in this order: 404 `not_found` for an unknown, malformed or another caller's session; 409 `conflict` for a session already given frames; 429 `rate_limited` while another frames call of the caller runs (one at a time); 429 `biometric_locked` while a consumer is locked; 503 when no face process can take the work — all before any frame is decoded. " +
        'Then the verdict, `passed` or `failed` with the first reason found, checked in this order: ' +
        '`session_expired` (also a session ended by a newer one of the caller); `replayed_frames` (a frame, pose or light, whose exact bytes this service received before, in any session: checked on keyed digests before any frame is decoded; a digest is kept only once its frame decoded); ' +
        '`implausible_timing` (the frames arrived sooner after the session was created than a person can follow its steps — LIVENESS_MIN_STEP_MS per step after the first —, or the claimed `capturedAt` times go backwards, span more than the server saw, or leave less than that per step); ' +
        "`replayed_frames` again where LIVENESS_NEAR_REPLAY_WINDOW_SECONDS is above 0 (the default: 30 days): one frame a near copy — the same pixels with new bytes, re-encoded, rescaled, recropped by a few pixels — of a frame of an earlier session, any caller's (keyed digests of sketches of the faces); `no_face`; `multiple_faces`; " +
        '`static_capture` (one picture repeated, shifted or re-encoded); `different_faces`; `challenge_not_followed` (the head poses, estimated from the landmarks, do not follow `steps` in order); ' +
        "`light_not_followed` (not exactly one light frame per light, a light frame without the session's face, or a face whose colour does not follow `lights`: too weak a response to read, or one that follows another sequence; judged on the light frames only); `spoof_suspected` (the passive model, or the moiré of a screen on the first frame). Never a score. `stepsSeen` lists the pose frames only. " +
        "A consumer's failed session counts as one failed biometric attempt. " +
        'A frame that is not a decodable image is 400 `invalid_image`, and the session is spent.',
      auth: 'consumer-or-operator',
      params: Type.Object({ id: Type.String({ maxLength: 100 }) }, Strict),
      multipart: {
        fields: Type.Object(
          {
            capturedAt: Type.Optional(
              Type.String({
                maxLength: 400,
                pattern: '^\\[\\s*(\\d{1,16}(\\.\\d+)?\\s*,\\s*)*\\d{1,16}(\\.\\d+)?\\s*\\]$',
                description:
                  "The client's capture time of each pose frame (`frames`, not `lightFrames`), in order, as a JSON array of milliseconds on the client's own clock (e.g. `Date.now()` at each capture; only differences are used): one per pose frame. A claim: the server checks it against what it saw itself and fails the session with `implausible_timing` when it contradicts that",
              }),
            ),
          },
          Strict,
        ),
        files: {
          frames: {
            required: true,
            repeat: { min: config.liveness.minFrames, max: config.liveness.maxFrames },
            description: 'One frame per part, in capture order',
          },
          // Any count up to the longest sequence is taken: a count other than the session's is a verdict
          // (`light_not_followed`), not a malformed request.
          ...(light
            ? {
                lightFrames: {
                  required: false,
                  repeat: { min: 0, max: MAX_LIGHT_FRAMES },
                  description:
                    'One frame per light of the session, in the order of `lights`: frame i captured while the screen shows `lights[i]` over most of its area, the face at the `center` pose. Another count (up to 8) fails the session with `light_not_followed`. Not accepted under LIVENESS_LIGHT=off',
                },
              }
            : {}),
        },
      },
      responses: { 200: { description: 'The verdict', schema: JudgedBody } },
      errors: [
        'validation_failed',
        'not_found',
        'conflict',
        'rate_limited',
        'biometric_locked',
        'invalid_image',
        'face_engine_unavailable',
        'dependency_unavailable',
      ],
      handler: async function submitLivenessFrames({ auth, params, fields, fileLists }) {
        const frames = (fileLists.frames ?? []).map((f) => f.data);
        const lightFrames = (fileLists.lightFrames ?? []).map((f) => f.data);
        const capturedAt = fields.capturedAt === undefined ? null : (JSON.parse(fields.capturedAt) as number[]);
        if (capturedAt && capturedAt.length !== frames.length)
          throw new AppError('validation_failed', `capturedAt holds ${capturedAt.length} times for ${frames.length} frames: one per frame`);
        return { body: await liveness.submitFrames(auth, params.id, { frames, lightFrames }, { receivedAt: Date.now(), capturedAt }) };
      },
    }),
  ];
}
