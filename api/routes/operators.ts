/**
 * Operator management, administrators only: create, reset a password, change, deactivate, and read an
 * operator's /identify SearchLog. The logic lives in api/services/operator-service.ts.
 */
import { Type } from '@sinclair/typebox';
import { AppError } from '../../shared/errors.js';
import { route, type AnyRoute } from '../route-table.js';
import { IsoDateTime, Page, PageQuery, Strict, Uuid } from '../schemas/common.js';
import type { AuthContext } from '../services/authorization.js';
import { IDENTIFIER_PATTERN, ORG_ID_PATTERN, type Actor } from '../services/operator-service.js';
import { NO_STORE } from './auth.js';
import type { RouteDeps } from './index.js';

const Role = Type.Union([Type.Literal('operator'), Type.Literal('administrator')]);
const Status = Type.Union([Type.Literal('active'), Type.Literal('deactivated')]);
const DisplayName = Type.String({ minLength: 1, maxLength: 120 });

// Any string: an id that is not a UUID is simply an unknown operator (404), like any other.
const OperatorParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'Operator id (UUID)' }) }, Strict);

export const OperatorBody = Type.Object({
  id: Uuid,
  identifier: Type.String(),
  displayName: Type.String(),
  role: Role,
  status: Status,
  mustResetPassword: Type.Boolean(),
  locked: Type.Boolean({ description: 'Locked after too many failed sign-ins (reset-password unlocks)' }),
  mfaEnabled: Type.Boolean({ description: 'A TOTP second factor is confirmed (reset-mfa clears it)' }),
  orgId: Type.String(),
  createdAt: IsoDateTime,
  updatedAt: IsoDateTime,
});

export const SearchLogBody = Type.Object(
  {
    referenceId: Uuid,
    id: Uuid,
    kind: Type.Literal('identify'),
    operatorId: Uuid,
    orgId: Type.Union([Type.String(), Type.Null()]),
    userId: Type.Union([Uuid, Type.Null()]),
    outcome: Type.String(),
    candidates: Type.Array(Type.Object({ userId: Uuid, score: Type.Number(), rank: Type.Integer() })),
    matchedUserIds: Type.Array(Uuid),
    topScore: Type.Union([Type.Number(), Type.Null()]),
    latencyMs: Type.Object({
      liveness: Type.Union([Type.Number(), Type.Null()]),
      embed: Type.Union([Type.Number(), Type.Null()]),
      search: Type.Union([Type.Number(), Type.Null()]),
      total: Type.Number(),
    }),
    engineVersion: Type.Union([Type.String(), Type.Null()]),
    errorCode: Type.Union([Type.String(), Type.Null()]),
    qualityScore: Type.Union([Type.Integer(), Type.Null()], { description: 'Capture quality 0..100 of the probe; null without a face' }),
    escalatedAt: Type.Union([IsoDateTime, Type.Null()]),
    escalatedBy: Type.Union([Uuid, Type.Null()]),
    createdAt: IsoDateTime,
  },
  { description: 'A full SearchLog row; `referenceId` repeats `id`' },
);

function actorOf(auth: AuthContext): Actor {
  if (auth.kind !== 'operator') throw new AppError('unauthorized', 'An administrator token is required');
  return { type: 'operator', id: auth.operatorId };
}

export default function operatorRoutes({ operators, mfa }: Pick<RouteDeps, 'operators' | 'mfa'>): AnyRoute[] {
  return [
    route({
      method: 'POST',
      path: '/operators/{id}/reset-mfa',
      operationId: 'resetOperatorMfa',
      tag: 'Operators',
      summary: 'Clear an operator\'s second factor and recovery codes (lost device)',
      description: 'Audited (`operator.mfa_reset`, severity high); every session of the operator ends. Under STAFF_MFA=required the operator sets up a new one at the next sign-in.',
      auth: 'administrator',
      params: OperatorParams,
      responses: { 200: { description: 'Cleared', schema: Type.Object({ status: Type.Literal('mfa_reset'), operator: OperatorBody }) } },
      errors: ['not_found'],
      handler: async ({ params, auth }) => ({ body: { status: 'mfa_reset' as const, operator: (await mfa.reset(params.id, { operatorId: auth.kind === 'operator' ? auth.operatorId : '' })).toPublic() } }),
    }),
    route({
      method: 'POST',
      path: '/operators',
      operationId: 'createOperator',
      tag: 'Operators',
      summary: 'Create an operator or administrator with a temporary password',
      description: 'The temporary password is shown once; the account must set its own password (POST /auth/operator/set-password) before anything else.',
      auth: 'administrator',
      body: Type.Object(
        {
          identifier: Type.String({ pattern: IDENTIFIER_PATTERN, description: 'Sign-in name: 3-64 of letters, digits and `._@+-`, unique regardless of case' }),
          displayName: DisplayName,
          role: Type.Optional(Role),
          orgId: Type.Optional(Type.String({ pattern: ORG_ID_PATTERN, description: 'Billing organisation; `default` when absent' })),
        },
        Strict,
      ),
      responses: {
        201: {
          description: 'Created (flagged: mustResetPassword true)',
          schema: Type.Object({ operator: OperatorBody, temporaryPassword: Type.String() }),
        },
      },
      errors: ['conflict'],
      handler: async ({ body, auth }) => {
        const { operator, temporaryPassword } = await operators.create(body, actorOf(auth));
        return { status: 201, headers: NO_STORE, body: { operator: operator.toPublic(), temporaryPassword } };
      },
    }),
    route({
      method: 'POST',
      path: '/operators/{id}/reset-password',
      operationId: 'resetOperatorPassword',
      tag: 'Operators',
      summary: 'Issue a fresh temporary password (the only password reset there is)',
      description: 'Flags the account, unlocks it, clears its failure count and ends all of its sessions.',
      auth: 'administrator',
      params: OperatorParams,
      responses: {
        200: { description: 'New temporary password', schema: Type.Object({ temporaryPassword: Type.String(), mustResetPassword: Type.Literal(true) }) },
      },
      errors: ['not_found'],
      handler: async ({ params, auth }) => ({ headers: NO_STORE, body: await operators.resetPassword(params.id, actorOf(auth)) }),
    }),
    route({
      method: 'PATCH',
      path: '/operators/{id}',
      operationId: 'updateOperator',
      tag: 'Operators',
      summary: 'Change an operator\'s display name, role or status',
      description:
        'Deactivation takes effect at once (its sessions end; its tokens get 403 `operator_deactivated`). ' +
        'Demoting or deactivating the last active, unlocked administrator is refused with 409 `conflict`.',
      auth: 'administrator',
      params: OperatorParams,
      body: Type.Object({ displayName: Type.Optional(DisplayName), role: Type.Optional(Role), status: Type.Optional(Status) }, { ...Strict, minProperties: 1 }),
      responses: { 200: { description: 'The operator as it is now', schema: Type.Object({ operator: OperatorBody }) } },
      errors: ['not_found', 'conflict'],
      handler: async ({ params, body, auth }) => ({ body: { operator: (await operators.update(params.id, body, actorOf(auth))).toPublic() } }),
    }),
    route({
      method: 'DELETE',
      path: '/operators/{id}',
      operationId: 'deactivateOperator',
      tag: 'Operators',
      summary: 'Deactivate an operator (no hard delete: the row and its history stay)',
      description: 'Its sessions end at once. Deactivating the last active, unlocked administrator is refused with 409 `conflict`.',
      auth: 'administrator',
      params: OperatorParams,
      responses: { 200: { description: 'The operator, deactivated', schema: Type.Object({ operator: OperatorBody }) } },
      errors: ['not_found', 'conflict'],
      handler: async ({ params, auth }) => ({ body: { operator: (await operators.deactivate(params.id, actorOf(auth))).toPublic() } }),
    }),
    route({
      method: 'GET',
      path: '/operators/{id}/sessions',
      operationId: 'listOperatorSearches',
      tag: 'Operators',
      summary: 'The operator\'s /identify calls: full SearchLog rows, newest first',
      auth: 'administrator',
      params: OperatorParams,
      query: PageQuery,
      responses: { 200: { description: 'A page of SearchLog rows', schema: Page(SearchLogBody) } },
      errors: ['not_found'],
      // The operator must exist (404 otherwise), deactivated or not: its history is kept.
      handler: async ({ params, query }) => ({ body: await operators.searchLogs(params.id, query) }),
    }),
  ];
}
