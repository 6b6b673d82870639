/** Disputes: consumers contest a history entry; administrators list them and move them along. */
import { Type } from '@sinclair/typebox';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { DateParam, IdParams, IsoDateTime, Page, PageQuery, Strict, Uuid } from '../../platform/http/schemas.js';
import { parseDateRange } from '../../platform/lists/date-range.js';
import { DISPUTE_STATUSES } from './service.js';
import type { DisputeService } from './service.js';

const Status = Type.Union(DISPUTE_STATUSES.map((s) => Type.Literal(s)));
const DisputeBody = Type.Object({
  id: Uuid,
  referenceId: Uuid,
  kind: Type.Union([Type.Literal('identify'), Type.Literal('verify_self')]),
  userId: Uuid,
  reason: Type.Union([Type.String(), Type.Null()]),
  status: Status,
  note: Type.Union([Type.String(), Type.Null()]),
  createdAt: IsoDateTime,
  updatedAt: IsoDateTime,
});

const CreateDisputeRequest = Type.Object(
  {
    referenceId: Type.String({ minLength: 1, maxLength: 64, description: 'The referenceId of a history entry (SearchLog)' }),
    reason: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  Strict,
);

const ListDisputesQuery = Type.Object(
  {
    ...PageQuery.properties,
    status: Type.Optional(Status),
    userId: Type.Optional(Uuid),
    referenceId: Type.Optional(Uuid),
    from: Type.Optional(DateParam('Disputes created on or after (ISO date = whole UTC day, or date-time)')),
    to: Type.Optional(DateParam('Disputes created on or before (inclusive)')),
  },
  Strict,
);

const PatchDisputeRequest = Type.Object(
  {
    status: Status,
    note: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  Strict,
);

export default function disputeRoutes(deps: { disputes: DisputeService }): AnyRoute[] {
  return [
    route({
      method: 'POST',
      path: '/disputes',
      operationId: 'createDispute',
      tag: 'Disputes',
      summary: 'Dispute a history entry that matched the caller, or a /verify/self the caller ran',
      auth: 'consumer',
      body: CreateDisputeRequest,
      responses: { 201: { description: 'Created (status open)', schema: Type.Object({ dispute: DisputeBody }) } },
      errors: ['forbidden', 'not_found', 'conflict'],
      handler: async function createDispute({ body, auth }) {
        return { status: 201, body: { dispute: await deps.disputes.create(auth.userId, body) } };
      },
    }),
    route({
      method: 'GET',
      path: '/disputes',
      operationId: 'listDisputes',
      tag: 'Disputes',
      summary: 'All disputes, newest first, with filters',
      auth: 'administrator',
      query: ListDisputesQuery,
      responses: { 200: { description: 'A page of disputes', schema: Page(DisputeBody) } },
      handler: async function listDisputes({ query }) {
        return {
          body: await deps.disputes.list({
            status: query.status,
            userId: query.userId,
            referenceId: query.referenceId,
            range: parseDateRange(query.from, query.to),
            page: query.page,
            pageSize: query.pageSize,
          }),
        };
      },
    }),
    route({
      method: 'PATCH',
      path: '/disputes/{id}',
      operationId: 'patchDispute',
      tag: 'Disputes',
      summary: 'Move a dispute: open → investigating → resolved | rejected',
      description: 'Any other move (backwards, skipping investigating, leaving a final state, staying put) is 409 `conflict`. Audited.',
      auth: 'administrator',
      params: IdParams,
      body: PatchDisputeRequest,
      responses: { 200: { description: 'The dispute after the move', schema: Type.Object({ dispute: DisputeBody }) } },
      errors: ['not_found', 'conflict'],
      handler: async function patchDispute({ params, body, auth }) {
        return { body: { dispute: await deps.disputes.updateStatus(auth.operatorId, params.id, body) } };
      },
    }),
  ];
}
