/**
 * Verification: 1:N /identify (operators), its escalation, and 1:1 /verify/self (consumers). An
 * operator's own past /identify calls (GET /identify/mine) are the staff wing's (features/staff/routes.ts).
 */
import { Type } from '@sinclair/typebox';
import { AppError } from '../../platform/errors.js';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { Strict, Uuid } from '../../platform/http/schemas.js';
import { QualityField } from '../face/index.js';
import type { VerificationService } from './service.js';
import type { Metrics } from '../../platform/metrics.js';
import type { Config } from '../../platform/config.js';
import { validationError } from '../../platform/http/validation.js';
import { livenessSessionRequired } from '../liveness/index.js';

const LatencyMs = Type.Object({
  liveness: Type.Union([Type.Number(), Type.Null()]),
  embed: Type.Union([Type.Number(), Type.Null()]),
  search: Type.Union([Type.Number(), Type.Null()]),
  total: Type.Number(),
});

const IdentifyBody = Type.Object({
  referenceId: Uuid,
  outcome: Type.Union([Type.Literal('match'), Type.Literal('no_match'), Type.Literal('liveness_failed'), Type.Literal('no_face')]),
  candidates: Type.Array(Type.Object({ userId: Uuid, score: Type.Number(), rank: Type.Integer({ minimum: 1 }) })),
  quality: QualityField,
  threshold: Type.Object(
    { setting: Type.Literal('IDENTIFY_MATCH_THRESHOLD'), value: Type.Number() },
    { description: 'The 1:N cosine threshold the candidates were cut at (IDENTIFY_MATCH_THRESHOLD; by default the value of MATCH_THRESHOLD)' },
  ),
  latencyMs: LatencyMs,
});

const SelfBody = Type.Object({
  referenceId: Uuid,
  outcome: Type.Union([Type.Literal('match'), Type.Literal('no_match'), Type.Literal('liveness_failed'), Type.Literal('no_face')]),
  score: Type.Optional(Type.Number({ description: 'Cosine with your canonical embedding, on a match only: a failed comparison answers no score' })),
  reason: Type.Optional(
    Type.Literal('liveness_session_invalid', {
      description: 'With `liveness_failed`: the livenessSessionId given is not a passed session of yours, unused and within its lifetime',
    }),
  ),
  proofToken: Type.Optional(Type.String({ description: 'Single-use; required by PATCH and DELETE /users/{id}' })),
  expiresIn: Type.Optional(Type.Integer({ description: 'Seconds (PROOF_TOKEN_TTL_SECONDS)' })),
  quality: QualityField,
  canonicalRefresh: Type.Optional(
    Type.Object(
      {
        refreshed: Type.Boolean(),
        reason: Type.Union(
          [
            'below_high_confidence',
            'quality_at_or_above_floor',
            'quality_not_worse_than_stored',
            'quality_below_floor_and_stored',
            'quality_below_floor',
            'quality_not_measured',
          ].map((r) => Type.Literal(r)),
        ),
      },
      {
        description:
          'On a match: whether this capture replaced your canonical embedding (high confidence, and quality at least CANONICAL_REFRESH_MIN_QUALITY or not worse than the stored capture), and why',
      },
    ),
  ),
  latencyMs: LatencyMs,
});

export default function verificationRoutes(deps: { verification: VerificationService; metrics: Metrics; config: Config }): AnyRoute[] {
  const service = deps.verification;
  return [
    route({
      method: 'POST',
      path: '/identify',
      operationId: 'identify',
      tag: 'Verification',
      summary: '1:N identification of a probe face against everyone enrolled',
      description:
        'The literal `attestation=true` is checked before anything else (400 `attestation_required`, no dependency called, no SearchLog row; also when the body is not multipart at all). Error bodies echo their code as `outcome`. Every call past that check writes one SearchLog row whatever its outcome. Face outcomes are 200 with `outcome`; candidates are those at or above IDENTIFY_MATCH_THRESHOLD (answered in `threshold`), best first, at most IDENTIFY_MAX_CANDIDATES; the largest face of the probe is used. `quality` is advisory and never changes the outcome.',
      auth: 'operator',
      outcomeInErrors: true,
      multipart: {
        fields: Type.Object({ attestation: Type.Optional(Type.String({ description: "Must be the literal 'true'" })) }, Strict),
        files: { file: { required: true, description: 'The probe face (JPEG, PNG or WebP); no customer identifier' } },
      },
      precheckBeforeState: true,
      precheck: ({ fields }) => {
        if ((fields as { attestation?: unknown }).attestation !== 'true') {
          deps.metrics.outcome('identify', 'attestation_required');
          throw new AppError('attestation_required', "The field attestation must be the string 'true'");
        }
      },
      responses: { 200: { description: 'The outcome and the candidates', schema: IdentifyBody } },
      errors: ['attestation_required', 'invalid_image', 'face_engine_unavailable', 'dependency_unavailable'],
      handler: async function identify({ auth, files }) {
        return { body: await service.identify(auth, files.file!.data) };
      },
    }),
    route({
      method: 'POST',
      path: '/identify/{referenceId}/escalate',
      operationId: 'escalateIdentification',
      tag: 'Verification',
      summary: 'Escalate an identification (sets escalatedAt once; a repeat keeps the first time)',
      auth: 'operator',
      params: Type.Object({ referenceId: Uuid }, Strict),
      responses: { 200: { description: 'Escalated', schema: Type.Object({ referenceId: Uuid, escalatedAt: Type.String({ format: 'date-time' }) }) } },
      errors: ['not_found'],
      handler: async function escalateIdentification({ auth, params }) {
        return { body: await service.escalate(auth, params.referenceId) };
      },
    }),
    route({
      method: 'POST',
      path: '/verify/self',
      operationId: 'verifySelf',
      tag: 'Verification',
      summary: "1:1 re-proof against the caller's own canonical embedding",
      description:
        "A match returns a single-use proofToken (PROOF_TOKEN_TTL_SECONDS); a high-confidence match (HIGH_CONFIDENCE_THRESHOLD) refreshes the canonical embedding when the capture's quality is at least CANONICAL_REFRESH_MIN_QUALITY or not worse than the stored capture's (`canonicalRefresh` says which). `quality` is advisory and never changes the outcome. " +
        'Every face outcome is 200 with `outcome`; `score` only on a match. Error bodies echo their code as `outcome`. Checked before the upload is decoded, in this order: 404 for a deleted user, 409 `conflict` when the caller has no enrolled face yet (no NIN or BVN linked), ' +
        '429 `biometric_locked` with Retry-After after BIOMETRIC_MAX_FAILURES consecutive `no_match`/`liveness_failed` here or failed verify-face comparisons (the lock lasts BIOMETRIC_LOCK_SECONDS, doubling with each further failure, up to 24 h; no SearchLog row), ' +
        '429 `rate_limited` while another /verify/self of the same user is in progress. Every call past these checks writes a SearchLog row. A capture over SELFIE_MAX_PIXELS is 400 `invalid_image`.',
      auth: 'consumer',
      outcomeInErrors: true,
      multipart: {
        fields: Type.Object(
          {
            livenessSessionId: Type.Optional(
              Type.String({
                minLength: 1,
                maxLength: 100,
                description:
                  'A passed liveness session of yours (POST /liveness/sessions), instead of an image: its best frontal frame is compared, once, within its lifetime; any other session answers outcome `liveness_failed` with `reason: "liveness_session_invalid"`',
              }),
            ),
          },
          Strict,
        ),
        files: {
          image: {
            required: (fields) => fields.livenessSessionId === undefined,
            description:
              'The live capture (JPEG, PNG or WebP), unless a livenessSessionId is given; under LIVENESS_MODE=challenge refused (422 `liveness_session_required`, before it is decoded, no SearchLog row)',
          },
        },
      },
      precheck: ({ fields, files }) => {
        if (deps.config.liveness.mode === 'challenge' && files.image) throw livenessSessionRequired();
        if ((fields as { livenessSessionId?: unknown }).livenessSessionId !== undefined && files.image) {
          throw validationError([{ in: 'fields', path: '/livenessSessionId', message: 'must not be sent with an image (send one or the other)' }]);
        }
      },
      responses: { 200: { description: 'The outcome; proofToken on a match', schema: SelfBody } },
      errors: [
        'not_found',
        'conflict',
        'biometric_locked',
        'rate_limited',
        'invalid_image',
        'liveness_session_required',
        'face_engine_unavailable',
        'dependency_unavailable',
      ],
      handler: async function verifySelf({ auth, files, fields }) {
        const capture = fields.livenessSessionId !== undefined ? { livenessSessionId: fields.livenessSessionId } : { image: files.image!.data };
        return { body: await service.verifySelf(auth, capture) };
      },
    }),
  ];
}
