/** GET /audit-events: the AuditEvent log for administrators, newest first, with filters and paging. */
import { Type } from '@sinclair/typebox';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { DateParam, IsoDateTime, Page, PageQuery, Strict, Uuid } from '../../platform/http/schemas.js';
import { parseDateRange } from '../../platform/lists/date-range.js';
import type { AuditService } from './service.js';

const Severity = Type.Union([Type.Literal('info'), Type.Literal('high')]);

const AuditEventBody = Type.Object({
  id: Type.String({ description: 'Sequence number (as a string)' }),
  type: Type.String({
    description: 'An event of the event map (docs/security.md, platform/events/README.md), e.g. auth.signed_in, operator.created, dispute.updated',
  }),
  severity: Severity,
  actorType: Type.Union([Type.String(), Type.Null()], { description: 'consumer, operator, system, or anonymous (a refused sign-in)' }),
  actorId: Type.Union([Uuid, Type.Null()]),
  subjectType: Type.Union([Type.String(), Type.Null()]),
  subjectId: Type.Union([Type.String(), Type.Null()]),
  data: Type.Record(Type.String(), Type.Unknown(), { description: 'Identifiers and masked values only' }),
  ip: Type.Union([Type.String(), Type.Null()], {
    description: "The client's address of the request that recorded the event (as TRUST_PROXY resolves it); null for events of workers, scripts and timers",
  }),
  userAgent: Type.Union([Type.String(), Type.Null()], {
    description: 'The User-Agent of that request (at most 256 characters); null when none was sent or outside a request',
  }),
  createdAt: IsoDateTime,
});

const ListAuditEventsQuery = Type.Object(
  {
    ...PageQuery.properties,
    type: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    severity: Type.Optional(Severity),
    actorId: Type.Optional(Uuid),
    subjectId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    from: Type.Optional(DateParam('Events on or after (ISO date = whole UTC day, or date-time)')),
    to: Type.Optional(DateParam('Events on or before (inclusive)')),
  },
  Strict,
);

export default function auditEventRoutes({ audit }: { audit: AuditService }): AnyRoute[] {
  return [
    route({
      method: 'GET',
      path: '/audit-events',
      operationId: 'listAuditEvents',
      tag: 'Audit',
      summary: 'Audit events, newest first, with filters',
      auth: 'administrator',
      query: ListAuditEventsQuery,
      responses: { 200: { description: 'A page of audit events', schema: Page(AuditEventBody) } },
      handler: async function listAuditEvents({ query }) {
        return {
          body: await audit.list({
            page: query.page,
            pageSize: query.pageSize,
            type: query.type,
            severity: query.severity,
            actorId: query.actorId,
            subjectId: query.subjectId,
            range: parseDateRange(query.from, query.to),
          }),
        };
      },
    }),
  ];
}
