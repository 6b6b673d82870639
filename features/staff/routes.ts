/**
 * Operator management, administrators only: list and read operators, create, reset a password, change,
 * deactivate, and read an operator's /identify SearchLog. The logic lives in features/staff/service.ts.
 */
import { Type } from '@sinclair/typebox';
import { NO_STORE, route, type AnyRoute } from '../../platform/http/route-table.js';
import { IsoDateTime, Page, PageQuery, Strict, Uuid } from '../../platform/http/schemas.js';
import { SearchLogBody } from '../verification/index.js';
import type { OperatorPrincipal } from '../../platform/http/principal.js';
import { IDENTIFIER_PATTERN, ORG_ID_PATTERN, type Actor } from './service.js';
import type { MfaService } from '../sign-in/index.js';
import type { OperatorService } from './service.js';

const Role = Type.Union([Type.Literal('operator'), Type.Literal('administrator')]);
const Status = Type.Union([Type.Literal('active'), Type.Literal('deactivated')]);
const DisplayName = Type.String({ minLength: 1, maxLength: 120 });

// Any string: an id that is not a UUID is simply an unknown operator (404), like any other.
const OperatorParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'Operator id (UUID)' }) }, Strict);

const OperatorBody = Type.Object({
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

const ListOperatorsQuery = Type.Object(
  {
    ...PageQuery.properties,
    role: Type.Optional(Type.Union([Type.Literal('operator'), Type.Literal('administrator')])),
    status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('deactivated')])),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 120, description: 'Substring of the identifier or the display name (case-insensitive)' })),
  },
  Strict,
);

function actorOf(auth: OperatorPrincipal): Actor {
  return { type: 'operator', id: auth.operatorId };
}

export default function operatorRoutes({ operators, mfa }: { operators: OperatorService; mfa: MfaService }): AnyRoute[] {
  return [
    route({
      method: 'GET',
      path: '/operators',
      operationId: 'listOperators',
      tag: 'Operators',
      summary: 'Operators and administrators, newest first, with filters',
      auth: 'administrator',
      query: ListOperatorsQuery,
      responses: { 200: { description: 'A page of operators (never a password hash)', schema: Page(OperatorBody) } },
      handler: async function listOperators({ query }) {
        return { body: await operators.list(query) };
      },
    }),
    route({
      method: 'GET',
      path: '/operators/{id}',
      operationId: 'getOperator',
      tag: 'Operators',
      summary: 'One operator',
      auth: 'administrator',
      params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'Operator id (UUID)' }) }, Strict),
      responses: { 200: { description: 'The operator', schema: Type.Object({ operator: OperatorBody }) } },
      errors: ['not_found'],
      handler: async function getOperator({ params }) {
        return { body: { operator: (await operators.get(params.id)).toPublic() } };
      },
    }),
    route({
      method: 'POST',
      path: '/operators/{id}/reset-mfa',
      operationId: 'resetOperatorMfa',
      tag: 'Operators',
      summary: "Clear an operator's second factor and recovery codes (lost device)",
      description:
        'Audited (`operator.mfa_reset`, severity high); every session of the operator ends. Under STAFF_MFA=required the operator sets up a new one at the next sign-in.',
      auth: 'administrator',
      params: OperatorParams,
      responses: { 200: { description: 'Cleared', schema: Type.Object({ status: Type.Literal('mfa_reset'), operator: OperatorBody }) } },
      errors: ['not_found'],
      handler: async function resetOperatorMfa({ params, auth }) {
        return { body: { status: 'mfa_reset' as const, operator: (await mfa.reset(params.id, { operatorId: auth.operatorId })).toPublic() } };
      },
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
      handler: async function createOperator({ body, auth }) {
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
      handler: async function resetOperatorPassword({ params, auth }) {
        return { headers: NO_STORE, body: await operators.resetPassword(params.id, actorOf(auth)) };
      },
    }),
    route({
      method: 'PATCH',
      path: '/operators/{id}',
      operationId: 'updateOperator',
      tag: 'Operators',
      summary: "Change an operator's display name, role or status",
      description:
        'Deactivation takes effect at once (its sessions end; its tokens get 403 `operator_deactivated`). ' +
        'Demoting or deactivating the last active, unlocked administrator is refused with 409 `conflict`.',
      auth: 'administrator',
      params: OperatorParams,
      body: Type.Object({ displayName: Type.Optional(DisplayName), role: Type.Optional(Role), status: Type.Optional(Status) }, { ...Strict, minProperties: 1 }),
      responses: { 200: { description: 'The operator as it is now', schema: Type.Object({ operator: OperatorBody }) } },
      errors: ['not_found', 'conflict'],
      handler: async function updateOperator({ params, body, auth }) {
        return { body: { operator: (await operators.update(params.id, body, actorOf(auth))).toPublic() } };
      },
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
      handler: async function deactivateOperator({ params, auth }) {
        return { body: { operator: (await operators.deactivate(params.id, actorOf(auth))).toPublic() } };
      },
    }),
    route({
      method: 'GET',
      path: '/operators/{id}/sessions',
      operationId: 'listOperatorSearches',
      tag: 'Operators',
      summary: "The operator's /identify calls: full SearchLog rows, newest first",
      auth: 'administrator',
      params: OperatorParams,
      query: PageQuery,
      responses: { 200: { description: 'A page of SearchLog rows', schema: Page(SearchLogBody) } },
      errors: ['not_found'],
      // The operator must exist (404 otherwise), deactivated or not: its history is kept.
      handler: async function listOperatorSearches({ params, query }) {
        return { body: await operators.searchLogs(params.id, query) };
      },
    }),
    route({
      method: 'GET',
      path: '/identify/mine',
      operationId: 'listMyIdentifications',
      tag: 'Verification',
      summary: "The caller's own /identify calls: full SearchLog rows, newest first",
      auth: 'operator',
      query: PageQuery,
      responses: { 200: { description: 'A page of SearchLog rows', schema: Page(SearchLogBody) } },
      handler: async function listMyIdentifications({ auth, query }) {
        return { body: await operators.searchLogs(auth.operatorId, query) };
      },
    }),
  ];
}
