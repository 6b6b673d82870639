/** Duplicate identities: the cases a link opens, their review evidence, and the face watch-list (administrators). */
import { Type } from '@sinclair/typebox';
import { NO_STORE, route, type AnyRoute } from '../../platform/http/route-table.js';
import { IdParams, IsoDateTime, Page, PageQuery, Strict, Uuid } from '../../platform/http/schemas.js';
import { DEDUPE_KINDS, DEDUPE_STATUSES } from './service.js';
import type { DedupeService } from './service.js';

const TAG = 'Duplicate identities';
const Kind = Type.Union(DEDUPE_KINDS.map((k) => Type.Literal(k)));
const Status = Type.Union(DEDUPE_STATUSES.map((s) => Type.Literal(s)));
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

const DedupeCase = Type.Object({
  id: Uuid,
  kind: Kind,
  status: Status,
  userId: Type.String({ format: 'uuid', description: 'The account that was linking' }),
  matchedUserId: Type.Optional(Type.String({ format: 'uuid', description: 'The account already enrolled with the face (duplicate, possible_duplicate)' })),
  watchlistEntryId: Type.Optional(Type.String({ format: 'uuid', description: 'The watch-list entry the face matched (watchlist)' })),
  score: Type.Number({ description: 'Cosine similarity of the two faces' }),
  registry: Type.Union([Type.Literal('nin'), Type.Literal('bvn')], { description: 'What was being linked' }),
  blocked: Type.Boolean({ description: 'The link was refused (DEDUPE_POLICY=hard-block)' }),
  captureAvailable: Type.Boolean({ description: 'The live capture is still kept: GET /dedupe/cases/{id}/capture' }),
  createdAt: IsoDateTime,
  decidedAt: Type.Optional(IsoDateTime),
  decidedBy: Type.Optional(Type.String({ format: 'uuid' })),
  note: Type.Optional(Type.String()),
});

const MaskedAccount = Type.Object({
  userId: Uuid,
  name: Nullable(Type.String({ description: 'Initials, e.g. G***** B***' })),
  phone: Nullable(Type.String()),
  nin: Nullable(Type.String({ description: 'Masked, last 3 digits' })),
  ninLinkedAt: Nullable(IsoDateTime),
  bvn: Nullable(Type.String({ description: 'Masked, last 3 digits' })),
  bvnLinkedAt: Nullable(IsoDateTime),
  deleted: Type.Boolean(),
});

const CaseDetail = Type.Object({
  case: DedupeCase,
  accounts: Type.Object({ user: MaskedAccount, matchedUser: Nullable(MaskedAccount) }),
  watchlistReason: Nullable(Type.String()),
});

const ListCasesQuery = Type.Object({ ...PageQuery.properties, status: Type.Optional(Status), kind: Type.Optional(Kind) }, Strict);

const DecideCaseRequest = Type.Object(
  {
    status: Type.Union([Type.Literal('confirmed'), Type.Literal('dismissed')]),
    note: Type.Optional(Type.String({ maxLength: 2000 })),
  },
  Strict,
);

const WatchlistEntry = Type.Object({ id: Uuid, reason: Type.String(), createdAt: IsoDateTime });
const Reason = Type.String({ minLength: 1, maxLength: 500, description: 'Why the face is listed' });

export default function dedupeRoutes(deps: { dedupe: DedupeService }): AnyRoute[] {
  const service = deps.dedupe;
  return [
    route({
      method: 'GET',
      path: '/dedupe/cases',
      operationId: 'listDedupeCases',
      tag: TAG,
      summary: 'Duplicate-identity cases, newest first',
      auth: 'administrator',
      query: ListCasesQuery,
      responses: { 200: { description: 'A page of cases', schema: Page(DedupeCase) } },
      handler: async function listDedupeCases({ query }) {
        return { body: await service.list({ status: query.status, kind: query.kind, page: query.page, pageSize: query.pageSize }) };
      },
    }),
    route({
      method: 'GET',
      path: '/dedupe/cases/{id}',
      operationId: 'getDedupeCase',
      tag: TAG,
      summary: 'A case, with the masked details of both accounts',
      auth: 'administrator',
      params: IdParams,
      responses: { 200: { description: 'The case', schema: CaseDetail } },
      errors: ['not_found'],
      handler: async function getDedupeCase({ params }) {
        return { body: await service.get(params.id), headers: NO_STORE };
      },
    }),
    route({
      method: 'GET',
      path: '/dedupe/cases/{id}/capture',
      operationId: 'getDedupeCaseCapture',
      tag: TAG,
      summary: "The case's live capture (JPEG), kept sealed until the case is decided plus DEDUPE_CAPTURE_RETENTION_DAYS",
      description: 'Every read is audited (`dedupe.capture_viewed`). 404 when the case keeps no capture.',
      auth: 'administrator',
      params: IdParams,
      responses: { 200: { description: 'The capture', contentType: 'image/jpeg' } },
      errors: ['not_found'],
      handler: async function getDedupeCaseCapture({ params, auth }) {
        const jpeg = await service.capture(auth.operatorId, params.id);
        return { body: jpeg, headers: { 'Content-Type': 'image/jpeg', ...NO_STORE } };
      },
    }),
    route({
      method: 'PATCH',
      path: '/dedupe/cases/{id}',
      operationId: 'decideDedupeCase',
      tag: TAG,
      summary: 'Decide an open case: confirmed (the same person under two identities) or dismissed',
      description:
        'The event `dedupe.case.decided`: audited (with the note) and delivered as a webhook (without the note). A decided case answers 409 `conflict`.',
      auth: 'administrator',
      params: IdParams,
      body: DecideCaseRequest,
      responses: { 200: { description: 'The decided case', schema: Type.Object({ case: DedupeCase }) } },
      errors: ['not_found', 'conflict'],
      handler: async function decideDedupeCase({ params, body, auth }) {
        return { body: { case: await service.decide(auth.operatorId, params.id, body) } };
      },
    }),
    route({
      method: 'POST',
      path: '/dedupe/cases/{id}/watchlist',
      operationId: 'watchlistDedupeCase',
      tag: TAG,
      summary: "Add a confirmed case's live capture to the watch-list",
      auth: 'administrator',
      params: IdParams,
      body: Type.Object({ reason: Reason }, Strict),
      responses: { 201: { description: 'Listed', schema: Type.Object({ entry: WatchlistEntry }) } },
      errors: ['not_found', 'conflict', 'no_face', 'face_engine_unavailable'],
      handler: async function watchlistDedupeCase({ params, body, auth }) {
        return { status: 201, body: { entry: await service.addFromCase(auth.operatorId, params.id, body.reason) } };
      },
    }),
    route({
      method: 'POST',
      path: '/watchlist',
      operationId: 'addWatchlistEntry',
      tag: TAG,
      summary: 'List a face: the largest face of the photo is embedded by the face workers and stored sealed',
      description: 'The photo itself is not kept. A link whose face matches an entry opens a `watchlist` case. Audited.',
      auth: 'administrator',
      multipart: {
        fields: Type.Object({ reason: Reason }, Strict),
        files: { file: { required: true, description: 'A photo of the face (JPEG, PNG or WebP)' } },
      },
      responses: { 201: { description: 'Listed', schema: Type.Object({ entry: WatchlistEntry }) } },
      errors: ['invalid_image', 'no_face', 'face_engine_unavailable', 'dependency_unavailable'],
      handler: async function addWatchlistEntry({ fields, files, auth }) {
        return { status: 201, body: { entry: await service.addFromPhoto(auth.operatorId, files.file!.data, fields.reason) } };
      },
    }),
    route({
      method: 'GET',
      path: '/watchlist',
      operationId: 'listWatchlist',
      tag: TAG,
      summary: 'The watch-list, newest first (no faces), a page at a time',
      auth: 'administrator',
      query: PageQuery,
      responses: { 200: { description: 'A page of entries', schema: Page(WatchlistEntry) } },
      handler: async function listWatchlist({ query }) {
        return { body: await service.watchlist(query) };
      },
    }),
    route({
      method: 'DELETE',
      path: '/watchlist/{id}',
      operationId: 'removeWatchlistEntry',
      tag: TAG,
      summary: 'Remove an entry (its sealed template is deleted); audited',
      auth: 'administrator',
      params: IdParams,
      responses: { 204: { description: 'Removed' } },
      errors: ['not_found'],
      handler: async function removeWatchlistEntry({ params, auth }) {
        await service.removeFromWatchlist(auth.operatorId, params.id);
        return { status: 204 };
      },
    }),
  ];
}
