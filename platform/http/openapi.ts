/**
 * OpenAPI 3.1, generated from the route table: the same TypeBox/JSON schemas AJV validates with.
 */
import type { TObject, TSchema } from '@sinclair/typebox';
import { ERROR_STATUS, type ErrorCode } from '../errors.js';
import type { AnyRoute, AuthRule } from './route-table.js';
import { ErrorBody } from './schemas.js';

type Json = Record<string, unknown>;

/** Plain JSON of a schema: TypeBox's symbol keys and `$id`s dropped. */
function plain(schema: TSchema): Json {
  return JSON.parse(JSON.stringify(schema, (k, v) => (k === '$id' ? undefined : v))) as Json;
}

const AUTH_TEXT: Record<AuthRule, string> = {
  none: 'No token.',
  consumer: 'Consumer bearer token.',
  'consumer:self': 'Consumer bearer token whose subject equals `{id}` (else 403 `forbidden`).',
  operator: 'Operator bearer token (operator or administrator, active, password not flagged for reset).',
  'operator:flagged-ok':
    'Operator bearer token; accepted while the password is flagged for reset (and, under STAFF_MFA=required, before a second factor is set up).',
  'operator:mfa-setup': 'Operator bearer token (active, password not flagged); accepted before a second factor is set up under STAFF_MFA=required.',
  administrator: 'Administrator bearer token.',
  'consumer-or-operator': 'Consumer bearer token, or operator bearer token (as for operator routes).',
};

function parameters(schema: TSchema | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const obj = plain(schema) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(obj.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || (obj.required ?? []).includes(name),
    schema: s,
    ...(typeof s.description === 'string' ? { description: s.description } : {}),
  }));
}

/**
 * The error codes a route can answer: those it documents, and those the router and the error middleware
 * produce for it whatever its handler does (platform/http/router.ts, platform/http/middleware/*). Checked from outside by
 * test/openapi-statuses.test.ts, which sends each route the requests these answer.
 */
function errorStatuses(r: AnyRoute): Map<number, ErrorCode[]> {
  const codes = new Set<ErrorCode>(r.errors ?? []);
  if (r.auth !== 'none') codes.add('unauthorized');
  if (r.auth === 'administrator' || r.auth === 'consumer:self') codes.add('forbidden');
  if (r.auth.startsWith('operator') || r.auth === 'administrator') codes.add('operator_deactivated');
  if (r.auth === 'operator' || r.auth === 'administrator') codes.add('password_reset_required');
  // The authorisation reads the consumer: an erased account is `not_found`.
  if (r.auth === 'consumer' || r.auth === 'consumer:self') codes.add('not_found');
  // Every route refuses a query parameter it does not accept.
  codes.add('validation_failed');
  // A body of another content type, or over its limit (JSON 64 KiB, uploads MAX_UPLOAD_BYTES).
  if (r.body || r.multipart) {
    codes.add('unsupported_media_type');
    codes.add('payload_too_large');
  }
  // Any route: PostgreSQL or Redis unreachable, or an unexpected failure.
  codes.add('dependency_unavailable');
  codes.add('internal_error');
  const byStatus = new Map<number, ErrorCode[]>();
  for (const c of codes) {
    const s = ERROR_STATUS[c];
    byStatus.set(s, [...(byStatus.get(s) ?? []), c]);
  }
  return byStatus;
}

export function buildOpenApi(routes: AnyRoute[], info: { version: string; serverUrl?: string }): Json {
  const paths: Record<string, Json> = {};
  for (const r of routes) {
    if (r.hidden) continue;
    const op: Json = {
      operationId: r.operationId,
      summary: r.summary,
      description: [r.description, `**Authorisation:** ${AUTH_TEXT[r.auth]}`].filter(Boolean).join('\n\n'),
      tags: [r.tag],
      parameters: [...parameters(r.params, 'path'), ...parameters(r.query, 'query')],
      responses: {} as Json,
    };
    // Public operations declare that they need nothing (`security: []`), so that a missing declaration is never mistaken for one.
    op.security = r.auth === 'none' ? [] : [{ bearerAuth: [] }];
    if (r.body) {
      op.requestBody = { required: true, content: { 'application/json': { schema: plain(r.body) } } };
    } else if (r.multipart) {
      const fields = plain(r.multipart.fields as TObject) as { properties?: Json; required?: string[] };
      const properties: Json = { ...(fields.properties ?? {}) };
      const required = [...(fields.required ?? [])];
      for (const [name, f] of Object.entries(r.multipart.files)) {
        const file = { type: 'string', contentMediaType: 'application/octet-stream' };
        properties[name] = f.repeat
          ? { type: 'array', items: file, minItems: f.repeat.min, maxItems: f.repeat.max, description: f.description }
          : { ...file, description: f.description };
        if (f.required === true) required.push(name);
      }
      op.requestBody = {
        required: true,
        content: { 'multipart/form-data': { schema: { type: 'object', additionalProperties: false, properties, required } } },
      };
    }
    const responses = op.responses as Json;
    for (const [status, spec] of Object.entries(r.responses)) {
      const contentType = spec.contentType ?? 'application/json';
      responses[status] = {
        description: spec.description,
        ...(spec.schema
          ? { content: { [contentType]: { schema: plain(spec.schema) } } }
          : contentType !== 'application/json'
            ? { content: { [contentType]: { schema: { type: 'string' } } } }
            : {}),
      };
    }
    for (const [status, codes] of errorStatuses(r)) {
      if (responses[String(status)]) continue;
      responses[String(status)] = {
        description: `Error: ${codes.map((c) => `\`${c}\``).join(', ')}`,
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    if (Object.keys(responses).length === 0)
      responses.default = { description: 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    const p = (paths[r.path] ??= {});
    p[r.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Face-backed identity verification service',
      version: info.version,
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
      description:
        'Consumers sign in with a phone number and a one-time code, link NIN and BVN by proving with a live selfie that they are the person in the registry photo, and re-prove themselves (1:1) before sensitive changes. Operators run 1:N identification. Every error body is `{ error, message, details? }`. Generated from the same schemas that validate requests.',
    },
    // A relative server: the document describes whichever host serves it (the console calls its own origin).
    servers: [{ url: info.serverUrl ?? '/', description: info.serverUrl ? 'This deployment' : 'The server that serves this document' }],
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: { Error: plain(ErrorBody) },
    },
  };
}
