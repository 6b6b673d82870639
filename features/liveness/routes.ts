/** Liveness sessions (SPEC 13.1): create one, then give it its frames once. */
import { Type } from '@sinclair/typebox';
import type { Config } from '../../platform/config.js';
import { AppError } from '../../platform/errors.js';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { Strict } from '../../platform/http/schemas.js';
import { FAILURE_REASONS, LIVENESS_STEPS } from './decision.js';
import type { LivenessService } from './service.js';

const TAG = 'Liveness';
const Step = Type.Union(LIVENESS_STEPS.map((s) => Type.Literal(s)));

const CreatedBody = Type.Object({
  session: Type.Object({
    id: Type.String({ format: 'uuid' }),
    steps: Type.Array(Step, {
      minItems: 2,
      maxItems: 4,
      description:
        'What to show, in order, first `center`. `turn_left`/`turn_right`: turn the head to your own left/right (in the captured, unmirrored image the nose moves towards the right/left edge); `look_up`: tilt the head back.',
    }),
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
  return [
    route({
      method: 'POST',
      path: '/liveness/sessions',
      operationId: 'createLivenessSession',
      tag: TAG,
      summary: 'Start a liveness session: server-random steps to perform in front of the camera',
      description:
        'The steps (2 to 4, first `center`) are drawn by the server for each session. The session belongs to the caller, lives LIVENESS_SESSION_TTL_SECONDS and takes its frames once. At most LIVENESS_SESSIONS_PER_HOUR sessions per caller per hour (429 `rate_limited` with Retry-After).',
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
        'The file field `frames` repeated `minFrames` to `maxFrames` times, in capture order (JPEG, PNG or WebP each). The verdict is `passed` or `failed` with the first reason found, checked in this order: ' +
        '`session_expired`; `replayed_frames` (a frame whose exact bytes this service received before, in any session: checked on keyed digests before any frame is decoded); ' +
        '`implausible_timing` (the frames arrived sooner after the session was created than a person can follow its steps — LIVENESS_MIN_STEP_MS per step after the first —, or the claimed `capturedAt` times go backwards, span more than the server saw, or leave less than that per step); `no_face`; `multiple_faces`; ' +
        '`replayed_frames` again, only where LIVENESS_NEAR_REPLAY_WINDOW_SECONDS is above 0 (off by default): every frame a near copy — the same pixels with new bytes, re-encoded or noised — of a frame of one and the same earlier session (keyed digests of sketches of the faces); ' +
        '`static_capture` (one picture repeated, shifted or re-encoded); `different_faces`; `challenge_not_followed` (the head poses, estimated from the landmarks, do not follow `steps` in order); `spoof_suspected` (the passive model, or the moiré of a screen on the first frame). Never a score. ' +
        "404 `not_found` for an unknown, malformed or another caller's session; 409 `conflict` for a second frames call. A consumer's failed session counts as one failed biometric attempt (429 `biometric_locked` while locked, before the session is used). " +
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
                  "The client's capture time of each frame, in order, as a JSON array of milliseconds on the client's own clock (e.g. `Date.now()` at each capture; only differences are used): one per frame. A claim: the server checks it against what it saw itself and fails the session with `implausible_timing` when it contradicts that",
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
        },
      },
      responses: { 200: { description: 'The verdict', schema: JudgedBody } },
      errors: ['validation_failed', 'not_found', 'conflict', 'biometric_locked', 'invalid_image', 'face_engine_unavailable', 'dependency_unavailable'],
      handler: async function submitLivenessFrames({ auth, params, fields, fileLists }) {
        const frames = (fileLists.frames ?? []).map((f) => f.data);
        const capturedAt = fields.capturedAt === undefined ? null : (JSON.parse(fields.capturedAt) as number[]);
        if (capturedAt && capturedAt.length !== frames.length)
          throw new AppError('validation_failed', `capturedAt holds ${capturedAt.length} times for ${frames.length} frames: one per frame`);
        return { body: await liveness.submitFrames(auth, params.id, frames, { receivedAt: Date.now(), capturedAt }) };
      },
    }),
  ];
}
