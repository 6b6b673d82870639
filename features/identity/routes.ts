/**
 * Identity linking (consumer token): validate → verify-face → link, the same shape for NIN and BVN.
 * Each route is declared explicitly per registry. The workflow is IdentityService (features/identity/service.ts).
 */
import { Type } from '@sinclair/typebox';
import type { Context } from 'koa';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { Strict } from '../../platform/http/schemas.js';
import { QualityField } from '../face/index.js';
import { OTHER, type Registry } from './service.js';
import { validationError } from '../../platform/http/validation.js';
import type { IdentityService } from './service.js';
import type { Config } from '../../platform/config.js';
import { livenessSessionRequired } from '../liveness/index.js';

const TAG = 'Identity linking';
const LABEL: Record<Registry, string> = { nin: 'NIN', bvn: 'BVN' };
const Token = Type.String({ minLength: 1, maxLength: 256 });

const ValidateAnswer = Type.Union([
  Type.Object({
    validationToken: Type.String({ description: 'For verify-face; the registry photo stays server-side with it' }),
    matchedName: Type.String({ description: 'The registry name, masked: first letter of each word, the rest `*`' }),
    expiresIn: Type.Integer({ description: 'Seconds (VALIDATION_TOKEN_TTL_SECONDS)' }),
  }),
  Type.Object({
    alreadyLinked: Type.Literal(true),
    linkedAt: Type.String({ format: 'date-time' }),
    deviceHint: Type.String({ description: "Coarse device of the other account's link, e.g. 'Android phone'" }),
  }),
]);

const VerifyFaceAnswer = Type.Object({
  outcome: Type.Literal('match'),
  linkToken: Type.String({ description: 'Single-use, for link' }),
  expiresIn: Type.Integer({ description: 'Seconds (LINK_TOKEN_TTL_SECONDS)' }),
  score: Type.Number({ description: 'Cosine similarity of the capture and the registry photo' }),
  quality: QualityField,
});

const VerifyFaceFields = Type.Object(
  {
    validationToken: Token,
    reuseCapture: Type.Optional(
      Type.Union([Type.Literal('true'), Type.Literal('false')], {
        description: "'true' reuses your most recent passing NIN capture (within CAPTURE_REUSE_SECONDS) instead of a file",
      }),
    ),
    livenessSessionId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description:
          'A passed liveness session of yours (POST /liveness/sessions), instead of a file: its best frontal frame is compared, once, within its lifetime',
      }),
    ),
  },
  Strict,
);

const LinkAnswer = Type.Object({
  status: Type.Literal('linked'),
  registry: Type.Union([Type.Literal('nin'), Type.Literal('bvn')]),
  linkedAt: Type.String({ format: 'date-time' }),
});

export default function identityRoutes({ config, identity }: { config: Config; identity: IdentityService }): AnyRoute[] {
  /** Outside production, tests can make the registry simulator hang or fail through the service. */
  const faultHeader = (ctx: Context) => (config.isProduction ? null : ctx.get('x-registry-fault') || null);

  const routesFor = (registry: Registry): AnyRoute[] => [
    route({
      method: 'POST',
      path: `/identity/${registry}/validate`,
      operationId: `validate${LABEL[registry]}`,
      tag: TAG,
      summary: `Validate a ${LABEL[registry]} against the identity registry`,
      description:
        `A new validation answers a validationToken and the masked matchedName (never the photo). A ${LABEL[registry]} already linked to another account answers only ` +
        "`{ alreadyLinked: true, linkedAt, deviceHint }`. 404 when the registry has no such record; 400 `registry_mismatch` when the record's name or date of birth disagrees with " +
        `the account's linked ${LABEL[OTHER[registry]]}; 502 \`registry_unavailable\` when the registry times out (REGISTRY_TIMEOUT_MS), fails or is unreachable; ` +
        `409 \`conflict\` when your account already has a ${LABEL[registry]} linked.`,
      auth: 'consumer',
      body: Type.Object({ [registry]: Type.String({ pattern: '^[0-9]{11}$', description: 'Exactly 11 digits' }) }, Strict),
      responses: { 200: { description: 'Validated, or already linked to another account', schema: ValidateAnswer } },
      errors: ['not_found', 'registry_mismatch', 'registry_unavailable', 'conflict'],
      handler: async function validateRegistryNumber({ body, auth, ctx }) {
        return {
          body: await identity.validate({ userId: auth.userId, registry, number: (body as Record<string, string>)[registry]!, fault: faultHeader(ctx) }),
        };
      },
    }),
    route({
      method: 'POST',
      path: `/identity/${registry}/verify-face`,
      operationId: `verifyFace${LABEL[registry]}`,
      tag: TAG,
      summary: `Prove with a live capture that your face matches the ${LABEL[registry]} registry photo`,
      description:
        `At most VERIFY_FACE_MAX_ATTEMPTS (5) attempts per validationToken, then 429 \`rate_limited\` with Retry-After. ` +
        'After BIOMETRIC_MAX_FAILURES consecutive failed comparisons of yours (`face_mismatch`, `liveness_failed`, across validation tokens and /verify/self), 429 `biometric_locked` with Retry-After before any image is decoded; a match resets the count. A failed comparison carries no score; a capture over SELFIE_MAX_PIXELS is 400 `invalid_image`. ' +
        `The capture must pass liveness, show one face and match the registry photo; ` +
        `when your account has the ${LABEL[OTHER[registry]]} linked, it must also match your canonical embedding (\`cross_registry_mismatch\`, behaviour by CROSS_REGISTRY_MISMATCH_POLICY). ` +
        "Face outcomes are 422; every error body echoes its code as `outcome`, and those of a live capture with a face (`liveness_failed`, `face_mismatch`, `cross_registry_mismatch`) carry its advisory `quality` too. `reuseCapture='true'` (without a file) reuses your most recent passing NIN capture within CAPTURE_REUSE_SECONDS, " +
        'still compared with this registry photo (404 when there is none to reuse). ' +
        '`livenessSessionId` (without a file) uses a passed liveness session of yours instead: its best frontal frame is compared, once, within the session\'s lifetime; a failed, expired, used or foreign session is 422 `liveness_failed` with `reason: "liveness_session_invalid"`. ' +
        'Under LIVENESS_MODE=challenge a file is refused with 422 `liveness_session_required` before it is decoded. A match drops the registry photo and answers a single-use linkToken.',
      auth: 'consumer',
      outcomeInErrors: true,
      multipart: {
        fields: VerifyFaceFields,
        files: {
          file: {
            required: (fields) => fields.reuseCapture !== 'true' && fields.livenessSessionId === undefined,
            description:
              "The live capture (JPEG, PNG or WebP); required unless reuseCapture is 'true' or a livenessSessionId is given (under LIVENESS_MODE=challenge: refused)",
          },
        },
      },
      responses: { 200: { description: 'The face matches', schema: VerifyFaceAnswer } },
      errors: [
        'not_found',
        'rate_limited',
        'biometric_locked',
        'liveness_failed',
        'liveness_session_required',
        'face_mismatch',
        'cross_registry_mismatch',
        'no_face',
        'multiple_faces',
        'invalid_image',
        'unsupported_media_type',
        'registry_unavailable',
        'face_engine_unavailable',
      ],
      precheck: ({ fields, files }) => {
        // Under LIVENESS_MODE=challenge a plain capture is refused before anything reads it.
        if (config.liveness.mode === 'challenge' && files.file) throw livenessSessionRequired();
        if (fields.reuseCapture === 'true' && files.file) {
          throw validationError([{ in: 'fields', path: '/file', message: "must not be sent with reuseCapture 'true' (send one or the other)" }]);
        }
        if (fields.livenessSessionId !== undefined && (files.file || fields.reuseCapture === 'true')) {
          throw validationError([
            { in: 'fields', path: '/livenessSessionId', message: "must not be sent with a file or reuseCapture 'true' (send one of them)" },
          ]);
        }
      },
      handler: async function verifyFaceAgainstRegistry({ fields, files, auth }) {
        return {
          body: await identity.verifyFace({
            userId: auth.userId,
            registry,
            validationToken: fields.validationToken,
            file: files.file?.data,
            reuseCapture: fields.reuseCapture === 'true',
            ...(fields.livenessSessionId !== undefined ? { livenessSessionId: fields.livenessSessionId } : {}),
          }),
        };
      },
    }),
    route({
      method: 'POST',
      path: `/identity/${registry}/link`,
      operationId: `link${LABEL[registry]}`,
      tag: TAG,
      summary: `Link the ${LABEL[registry]} with a linkToken from verify-face`,
      description:
        `Consumes the linkToken atomically (a replayed, expired, unknown or another user's token is 404 \`not_found\`), creates the ${LABEL[registry]} link, fills name, date of birth and gender ` +
        'from the registry record on the first link, and upserts the canonical embedding (searchable as soon as this answers).',
      auth: 'consumer',
      body: Type.Object({ linkToken: Token }, Strict),
      responses: { 200: { description: 'Linked', schema: LinkAnswer } },
      errors: ['not_found', 'conflict'],
      handler: async function linkRegistryNumber({ body, auth, userAgent }) {
        return {
          body: await identity.link({ userId: auth.userId, registry, linkToken: body.linkToken, userAgent }),
        };
      },
    }),
  ];

  return [...routesFor('nin'), ...routesFor('bvn')];
}
