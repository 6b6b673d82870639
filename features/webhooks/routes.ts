/** Webhooks (Standard Webhooks v1, docs/webhooks.md): endpoints, their delivery log and replays; administrators only. */
import { Type } from '@sinclair/typebox';
import { PUBLIC_EVENT_TYPES as WEBHOOK_EVENT_TYPES } from '../../platform/events/map.js';
import { NO_STORE, route, type AnyRoute } from '../../platform/http/route-table.js';
import { IdParams, IsoDateTime, Page, PageQuery, Strict, Uuid } from '../../platform/http/schemas.js';
import type { WebhookService } from './service.js';

const EventType = Type.Union(
  WEBHOOK_EVENT_TYPES.map((t) => Type.Literal(t)),
  { description: 'A webhook event type (docs/webhooks.md)' },
);
const Events = Type.Array(EventType, { minItems: 1, maxItems: WEBHOOK_EVENT_TYPES.length * 2, description: 'The event types delivered to this endpoint' });
const Url = Type.String({
  minLength: 8,
  maxLength: 2048,
  description: 'Where events are POSTed. In production (WEBHOOK_ALLOW_PRIVATE off): https only, to a public address (checked again when each attempt is sent).',
});
const Description = Type.String({ maxLength: 500 });
const Secret = Type.String({ pattern: '^whsec_[A-Za-z0-9+/=]+$', description: 'The signing secret (`whsec_` + base64), shown only in this answer' });

const EndpointBody = Type.Object({
  id: Uuid,
  url: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  events: Type.Array(EventType),
  status: Type.Union([Type.Literal('active'), Type.Literal('disabled')]),
  disabledReason: Type.Union([Type.Literal('administrator'), Type.Literal('gone'), Type.Null()], {
    description: '`gone`: the receiver answered 410 Gone; `administrator`: disabled by hand',
  }),
  previousSecretExpiresAt: Type.Union([IsoDateTime, Type.Null()], { description: 'After a rotation, until when the previous secret still signs' }),
  createdAt: IsoDateTime,
  updatedAt: IsoDateTime,
});

const AttemptBody = Type.Object({
  id: Uuid,
  eventId: Uuid,
  eventType: Type.String(),
  attempt: Type.Integer({ minimum: 1 }),
  status: Type.Union([Type.Literal('succeeded'), Type.Literal('failed'), Type.Literal('pending')]),
  responseStatus: Type.Union([Type.Integer(), Type.Null()], { description: "The receiver's HTTP status; null when none came (timeout, refused address)" }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why no answer came, when none did' }),
  createdAt: IsoDateTime,
});

const CreateRequest = Type.Object({ url: Url, events: Events, description: Type.Optional(Description) }, Strict);
const PatchRequest = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(Events),
    description: Type.Optional(Type.Union([Description, Type.Null()])),
    status: Type.Optional(
      Type.Union([Type.Literal('active'), Type.Literal('disabled')], { description: '`active` also re-enables an endpoint disabled by a 410' }),
    ),
  },
  { ...Strict, minProperties: 1 },
);
const EventParams = Type.Object({ eventId: Uuid }, Strict);

export default function webhookRoutes(deps: { webhooks: WebhookService }): AnyRoute[] {
  const service = deps.webhooks;
  return [
    route({
      method: 'POST',
      path: '/webhooks/endpoints',
      operationId: 'createWebhookEndpoint',
      tag: 'Webhooks',
      summary: 'Register a webhook endpoint; the answer carries its signing secret, shown this once',
      description: 'The secret is stored sealed and never shown again (rotate it to get a new one). Audited.',
      auth: 'administrator',
      body: CreateRequest,
      responses: { 201: { description: 'Created (status active)', schema: Type.Object({ endpoint: EndpointBody, secret: Secret }) } },
      errors: ['validation_failed'],
      handler: async function createWebhookEndpoint({ auth, body }) {
        return { status: 201, headers: NO_STORE, body: await service.create(auth.operatorId, body) };
      },
    }),
    route({
      method: 'GET',
      path: '/webhooks/endpoints',
      operationId: 'listWebhookEndpoints',
      tag: 'Webhooks',
      summary: 'All webhook endpoints, newest first',
      auth: 'administrator',
      query: PageQuery,
      responses: { 200: { description: 'A page of endpoints', schema: Page(EndpointBody) } },
      handler: async function listWebhookEndpoints({ query }) {
        return { body: await service.list(query) };
      },
    }),
    route({
      method: 'GET',
      path: '/webhooks/endpoints/{id}',
      operationId: 'getWebhookEndpoint',
      tag: 'Webhooks',
      summary: 'One webhook endpoint (never its secret)',
      auth: 'administrator',
      params: IdParams,
      responses: { 200: { description: 'The endpoint', schema: Type.Object({ endpoint: EndpointBody }) } },
      errors: ['not_found'],
      handler: async function getWebhookEndpoint({ params }) {
        return { body: { endpoint: await service.get(params.id) } };
      },
    }),
    route({
      method: 'PATCH',
      path: '/webhooks/endpoints/{id}',
      operationId: 'patchWebhookEndpoint',
      tag: 'Webhooks',
      summary: "Change an endpoint's URL, event types or description, or disable / re-enable it",
      auth: 'administrator',
      params: IdParams,
      body: PatchRequest,
      responses: { 200: { description: 'The endpoint after the change', schema: Type.Object({ endpoint: EndpointBody }) } },
      errors: ['not_found', 'validation_failed'],
      handler: async function patchWebhookEndpoint({ auth, params, body }) {
        return { body: { endpoint: await service.update(auth.operatorId, params.id, body) } };
      },
    }),
    route({
      method: 'DELETE',
      path: '/webhooks/endpoints/{id}',
      operationId: 'deleteWebhookEndpoint',
      tag: 'Webhooks',
      summary: 'Delete an endpoint with its pending deliveries and delivery log',
      auth: 'administrator',
      params: IdParams,
      responses: { 204: { description: 'Deleted' } },
      errors: ['not_found'],
      handler: async function deleteWebhookEndpoint({ auth, params }) {
        await service.remove(auth.operatorId, params.id);
        return { status: 204 };
      },
    }),
    route({
      method: 'POST',
      path: '/webhooks/endpoints/{id}/rotate-secret',
      operationId: 'rotateWebhookSecret',
      tag: 'Webhooks',
      summary: 'A new signing secret, shown this once; the previous one keeps signing for WEBHOOK_SECRET_OVERLAP_SECONDS',
      description: 'During the overlap every delivery carries two signatures (space-separated in `webhook-signature`), one per secret. Audited.',
      auth: 'administrator',
      params: IdParams,
      responses: {
        200: {
          description: 'The new secret',
          schema: Type.Object({ secret: Secret, previousSecretExpiresAt: IsoDateTime }),
        },
      },
      errors: ['not_found'],
      handler: async function rotateWebhookSecret({ auth, params }) {
        return { headers: NO_STORE, body: await service.rotateSecret(auth.operatorId, params.id) };
      },
    }),
    route({
      method: 'GET',
      path: '/webhooks/endpoints/{id}/deliveries',
      operationId: 'listWebhookDeliveries',
      tag: 'Webhooks',
      summary: "The endpoint's delivery log: one row per attempt, newest first",
      auth: 'administrator',
      params: IdParams,
      query: PageQuery,
      responses: { 200: { description: 'A page of attempts', schema: Page(AttemptBody) } },
      errors: ['not_found'],
      handler: async function listWebhookDeliveries({ params, query }) {
        return { body: await service.deliveries(params.id, query) };
      },
    }),
    route({
      method: 'POST',
      path: '/webhooks/events/{eventId}/replay',
      operationId: 'replayWebhookEvent',
      tag: 'Webhooks',
      summary: 'Send an event again (same body and webhook-id) to the endpoints it was first sent to, if still active and subscribed',
      auth: 'administrator',
      params: EventParams,
      responses: {
        202: {
          description: 'Queued: one new delivery per endpoint',
          schema: Type.Object({ eventId: Uuid, status: Type.Literal('queued'), deliveries: Type.Integer({ minimum: 0 }) }),
        },
      },
      errors: ['not_found'],
      handler: async function replayWebhookEvent({ auth, params }) {
        return { status: 202, body: await service.replay(auth.operatorId, params.eventId) };
      },
    }),
  ];
}
