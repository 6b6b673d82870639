/**
 * The consumer's own data: profile (GET/PATCH/DELETE /users/{id}), history and its CSV export, and
 * preferences. Every route is `consumer:self`: `{id}` must be the token's subject (else 403), and a
 * deleted user's still-valid token gets 404 (the authorisation layer).
 */
import { Type } from '@sinclair/typebox';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { IdParams, IsoDateTime, Page, PageQuery, StatusBody, Strict, Uuid } from '../../platform/http/schemas.js';
import { LANGUAGES, NOTIFY_CHANNELS } from './preferences-service.js';
import type { DataExportService } from './data-export-service.js';
import type { PreferencesService } from './preferences-service.js';
import type { UserService } from './user-service.js';
import type { HistoryService } from '../verification/index.js';

const Nullable = <T extends ReturnType<typeof Type.String>>(s: T) => Type.Union([s, Type.Null()]);

export const UserBody = Type.Object({
  id: Uuid,
  phone: Type.String({ description: 'E.164' }),
  name: Nullable(Type.String()),
  dateOfBirth: Nullable(Type.String({ format: 'date' })),
  gender: Nullable(Type.String()),
  bankAccount: Nullable(Type.String({ description: 'The BVN-linked 10-digit NUBAN in effect' })),
  pendingBankAccount: Nullable(Type.String({ description: 'A requested change awaiting the upstream confirmation' })),
  ninLinked: Type.Boolean(),
  bvnLinked: Type.Boolean(),
  createdAt: IsoDateTime,
});

const ProofToken = Type.String({ maxLength: 256, description: 'A fresh single-use proofToken from a matching POST /verify/self' });

// proofToken is optional in the schema on purpose: a missing token is 403 `proof_token_invalid`
// (interface document), not a schema error. Every other key (name, dateOfBirth, gender, ...) is 400.
const PatchUserRequest = Type.Object(
  {
    proofToken: Type.Optional(ProofToken),
    phone: Type.Optional(Type.String({ minLength: 1, maxLength: 32, description: 'New phone; E.164 or a Nigerian local form (normalised to E.164)' })),
    bankAccount: Type.Optional(
      Type.String({ pattern: '^[0-9]{10}$', description: 'New BVN-linked account (10-digit NUBAN); pending until the upstream confirms it' }),
    ),
  },
  Strict,
);

const DeleteUserRequest = Type.Object({ proofToken: Type.Optional(ProofToken) }, Strict);

const PatchUserResponse = Type.Object({
  status: Type.Union([Type.Literal('applied'), Type.Literal('pending_upstream')]),
  user: UserBody,
});

const HistoryItem = Type.Object({
  referenceId: Uuid,
  kind: Type.Union([Type.Literal('identify'), Type.Literal('verify_self')]),
  outcome: Type.String(),
  score: Type.Union([Type.Number(), Type.Null()], {
    description:
      "The user's own score: for /identify this user's candidate score, for /verify/self its score when it matched (null for a failed comparison: no oracle for someone trying faces)",
  }),
  createdAt: IsoDateTime,
  disputed: Type.Boolean({ description: 'Whether this user has disputed the entry' }),
});

const PreferencesBody = Type.Object({
  notifyChannel: Type.Union(NOTIFY_CHANNELS.map((c) => Type.Literal(c))),
  language: Type.Union(LANGUAGES.map((l) => Type.Literal(l))),
  marketingOptIn: Type.Boolean(),
});

const PatchPreferencesRequest = Type.Object(
  {
    notifyChannel: Type.Optional(Type.Union(NOTIFY_CHANNELS.map((c) => Type.Literal(c)))),
    language: Type.Optional(Type.Union(LANGUAGES.map((l) => Type.Literal(l)))),
    marketingOptIn: Type.Optional(Type.Boolean()),
  },
  Strict,
);

const Masked = Type.Union([Type.String(), Type.Null()]);
const DataExportBody = Type.Object({
  exportedAt: IsoDateTime,
  profile: UserBody,
  links: Type.Array(
    Type.Object({
      registry: Type.Union([Type.Literal('nin'), Type.Literal('bvn')]),
      number: Type.Union([Type.String({ description: 'Masked: the last 3 digits only' }), Type.Null()]),
      linkedAt: IsoDateTime,
      deviceHint: Masked,
      crossRegistryFlagged: Type.Boolean(),
      registryRecord: Type.Union([
        Type.Object(
          { firstName: Type.String(), middleName: Masked, lastName: Type.String(), dateOfBirth: Type.String(), gender: Type.String() },
          { description: 'What the registry returned when the link was made' },
        ),
        Type.Null(),
      ]),
    }),
  ),
  preferences: PreferencesBody,
  history: Type.Array(HistoryItem, { description: 'The whole history, newest first' }),
  disputes: Type.Array(
    Type.Object({
      id: Uuid,
      referenceId: Uuid,
      kind: Type.Union([Type.Literal('identify'), Type.Literal('verify_self')]),
      reason: Masked,
      status: Type.String(),
      note: Masked,
      createdAt: IsoDateTime,
      updatedAt: IsoDateTime,
    }),
  ),
  biometric: Type.Object(
    {
      templateEnrolled: Type.Boolean(),
      source: Masked,
      engineVersion: Masked,
      qualityScore: Type.Union([Type.Number(), Type.Null()]),
      updatedAt: Type.Union([IsoDateTime, Type.Null()]),
      note: Type.String(),
    },
    { description: 'What is held about the face; never the template itself' },
  ),
});

/** Where GET /users/{id}/export takes its proofToken. */
const PROOF_TOKEN_HEADER = 'X-Proof-Token';

export default function userRoutes({
  users,
  history,
  preferences,
  dataExport,
}: {
  users: UserService;
  history: HistoryService;
  preferences: PreferencesService;
  dataExport: DataExportService;
}): AnyRoute[] {
  return [
    route({
      method: 'GET',
      path: '/users/{id}/export',
      operationId: 'exportUserData',
      tag: 'Profile',
      summary: 'Everything held about the consumer, as one JSON document (the right of access)',
      description:
        "Profile, links (numbers masked to their last 3 digits, with the registry record they were made with), preferences, the whole history, disputes, and what is held about the face (whether a template is enrolled, its source and date). Never a template, a photo, a full NIN/BVN or a token. Served with `Content-Disposition: attachment`. Each export sends an SMS notice to the account's phone; at most EXPORTS_PER_DAY (3) per consumer in 24 hours, then 429 `rate_limited` with Retry-After. " +
        'Step-up: a fresh proofToken of POST /verify/self (of this session) in the request header `X-Proof-Token` (a GET has no body, and a query string would reach access logs and browser history); missing, wrong or used → 403 `proof_token_invalid`. The token is spent by this request whatever it answers.',
      auth: 'consumer:self',
      params: IdParams,
      responses: { 200: { description: 'The data export', schema: DataExportBody } },
      errors: ['not_found', 'proof_token_invalid', 'rate_limited'],
      handler: async function exportUserData({ params, auth, ctx }) {
        const body = await dataExport.export(params.id, auth.sessionId, ctx.get(PROOF_TOKEN_HEADER) || undefined);
        return { headers: { 'Content-Disposition': `attachment; filename="my-data-${params.id}.json"` }, body };
      },
    }),
    route({
      method: 'GET',
      path: '/users/{id}',
      operationId: 'getUser',
      tag: 'Profile',
      summary: "The consumer's own profile",
      auth: 'consumer:self',
      params: IdParams,
      responses: { 200: { description: 'The profile', schema: UserBody } },
      errors: ['not_found'],
      handler: async function getUser({ params }) {
        return { body: await users.get(params.id) };
      },
    }),
    route({
      method: 'PATCH',
      path: '/users/{id}',
      operationId: 'patchUser',
      tag: 'Profile',
      summary: 'Change the phone (applied) or the BVN-linked bankAccount (pending upstream), with a proofToken',
      description:
        "Strict body: name, dateOfBirth, gender and any other key are 400 `validation_failed`; at least one of phone and bankAccount. Checked in this order: the body and the phone's form (400 `validation_failed`; a number outside OTP_ALLOWED_COUNTRY_CODES 400 `phone_not_supported`), the proofToken (403 `proof_token_invalid`), then a phone held by another account (409 `conflict`, never told without a valid proofToken). A refused body does not burn the token; from the proofToken check on, the token is spent whatever the answer (a 409 included). A bankAccount change answers `pending_upstream`: the old value stays in effect until the upstream confirmation lands (after BANK_ACCOUNT_CONFIRM_DELAY_MS). " +
        'A phone change is applied at once, an SMS notice goes to the old and the new number (each only if within OTP_ALLOWED_COUNTRY_CODES), and every other session of the account ends. The proofToken is bound to the session that ran /verify/self: from another session it is 403 `proof_token_invalid`.',
      auth: 'consumer:self',
      params: IdParams,
      body: PatchUserRequest,
      responses: { 200: { description: '`applied` (phone only) or `pending_upstream` (a bankAccount change is included)', schema: PatchUserResponse } },
      errors: ['phone_not_supported', 'proof_token_invalid', 'conflict', 'not_found'],
      handler: async function patchUser({ params, body, auth }) {
        return {
          body: await users.update(params.id, { proofToken: body.proofToken ?? '', phone: body.phone, bankAccount: body.bankAccount }, auth.sessionId),
        };
      },
    }),
    route({
      method: 'DELETE',
      path: '/users/{id}',
      operationId: 'deleteUser',
      tag: 'Profile',
      summary: 'Delete the account, with a proofToken',
      description:
        'The canonical embedding leaves the vector index first (every search replica applies the removal before its next search), then the account is soft-deleted and every refresh token of its sessions ends. Afterwards the same access token gets 404 `not_found`.',
      auth: 'consumer:self',
      params: IdParams,
      body: DeleteUserRequest,
      responses: { 200: { description: 'Deleted', schema: StatusBody('deleted') } },
      errors: ['proof_token_invalid', 'not_found'],
      handler: async function deleteUser({ params, body, auth }) {
        return { body: await users.delete(params.id, body.proofToken ?? '', auth.sessionId) };
      },
    }),
    route({
      method: 'GET',
      path: '/users/{id}/history',
      operationId: 'getUserHistory',
      tag: 'Profile',
      summary: 'Every /identify that matched the user and every /verify/self the user ran, newest first',
      auth: 'consumer:self',
      params: IdParams,
      query: PageQuery,
      responses: { 200: { description: 'A page of history', schema: Page(HistoryItem) } },
      errors: ['not_found'],
      handler: async function getUserHistory({ params, query }) {
        return { body: await history.list(params.id, query.page, query.pageSize) };
      },
    }),
    route({
      method: 'GET',
      path: '/users/{id}/history/export',
      operationId: 'exportUserHistory',
      tag: 'Profile',
      summary: 'The whole history as a streamed CSV attachment',
      description:
        "Columns: referenceId, kind, outcome, score, createdAt, disputed (a header row, then one row per entry, newest first). A text cell that would start a spreadsheet formula (`=`, `+`, `-`, `@`, tab, CR) is prefixed with `'`.",
      auth: 'consumer:self',
      params: IdParams,
      responses: { 200: { description: 'text/csv, Content-Disposition: attachment; filename="history-<id>.csv"', contentType: 'text/csv' } },
      errors: ['not_found'],
      handler: async function exportUserHistory({ params }) {
        return {
          headers: {
            'Content-Type': 'text/csv; charset=utf-8',
            'Content-Disposition': `attachment; filename="history-${params.id}.csv"`,
            'Cache-Control': 'no-store',
          },
          body: history.csv(params.id),
        };
      },
    }),
    route({
      method: 'GET',
      path: '/users/{id}/preferences',
      operationId: 'getPreferences',
      tag: 'Preferences',
      summary: 'Notification channel, language and marketing opt-in (defaults when never set)',
      auth: 'consumer:self',
      params: IdParams,
      responses: { 200: { description: 'The preferences', schema: PreferencesBody } },
      errors: ['not_found'],
      handler: async function getPreferences({ params }) {
        return { body: await preferences.get(params.id) };
      },
    }),
    route({
      method: 'PATCH',
      path: '/users/{id}/preferences',
      operationId: 'patchPreferences',
      tag: 'Preferences',
      summary: 'Change preferences (strict body; no proofToken needed)',
      auth: 'consumer:self',
      params: IdParams,
      body: PatchPreferencesRequest,
      responses: { 200: { description: 'The preferences after the change', schema: PreferencesBody } },
      errors: ['not_found'],
      handler: async function patchPreferences({ params, body }) {
        return { body: await preferences.update(params.id, body) };
      },
    }),
  ];
}
