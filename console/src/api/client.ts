/**
 * The one typed client of the API, generated from GET /openapi.json (schema.d.ts, by
 * scripts/gen-console-client.ts) and driven by openapi-fetch. The console uses it, and so do the
 * end-to-end tests: the OpenAPI document is proved by a real client.
 */
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema.js';

export type { paths } from './schema.js';
export type Api = ReturnType<typeof createApiClient>;

/** The error envelope of every 4xx/5xx: `{ error, message, details?, outcome?, quality? }`. */
export interface ApiError {
  error: string;
  message: string;
  outcome?: string;
  /** Advisory capture quality, on verify-face's 422 face outcomes of a capture with a face. */
  quality?: { score: number; issues: string[] } | null;
  details?: Record<string, unknown>;
}

/**
 * `baseUrl`: '' in the browser (same origin), the server's URL in tests. `token()` is read at each
 * request, so a refreshed access token is used at once; it is never written anywhere but memory.
 */
export function createApiClient(baseUrl: string, token: () => string | null = () => null, fetchImpl?: typeof fetch) {
  const client = createClient<paths>({ baseUrl, ...(fetchImpl ? { fetch: fetchImpl } : {}) });
  const bearer: Middleware = {
    onRequest({ request }) {
      const t = token();
      if (t && !request.headers.has('Authorization')) request.headers.set('Authorization', `Bearer ${t}`);
      return request;
    },
  };
  client.use(bearer);
  return client;
}

/** A multipart body for openapi-fetch: the typed fields are checked, FormData is what is sent. */
export function multipart(fields: Record<string, string | Blob | undefined>, filename = 'capture.jpg'): { body: never; bodySerializer: () => FormData } {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    if (typeof v === 'string') form.append(k, v);
    else form.append(k, v, filename);
  }
  return { body: fields as never, bodySerializer: () => form };
}
