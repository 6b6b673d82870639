/**
 * Every status the router answers is declared in the OpenAPI document, as a validating proxy (Stoplight
 * Prism) in front of the service would check. The test walks the route table and sends each route the
 * requests the router refuses before any handler runs: no token, a token of another kind, a body of
 * another content type, an unknown query parameter, a body over the limit. Each answer must be the
 * error envelope with a status the document lists for that operation.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { allRoutes } from '../processes/web/routes.js';
import type { AnyRoute } from '../platform/http/route-table.js';
import { useHarness } from './helpers/harness.js';
import { call } from './helpers/http.js';
import { newConsumer, newOperator } from './helpers/principals.js';

const MAX_UPLOAD_BYTES = 20_000;
const h = useHarness(test, { env: { MAX_UPLOAD_BYTES: String(MAX_UPLOAD_BYTES) } });

type Json = Record<string, any>;

/** A value the path parameter's schema accepts (an enum's first value, a UUID, else a word). */
function sampleParam(schema: Json | undefined, fallback: string): string {
  if (!schema) return fallback;
  if (schema.const !== undefined) return String(schema.const);
  if (Array.isArray(schema.enum)) return String(schema.enum[0]);
  if (Array.isArray(schema.anyOf) && schema.anyOf[0]?.const !== undefined) return String(schema.anyOf[0].const);
  if (schema.format === 'uuid') return randomUUID();
  return fallback;
}

test('every status the router answers on each route is in the OpenAPI document', async (t) => {
  t.timeout(120_000);
  const consumer = await newConsumer(h);
  const operator = await newOperator(h);
  const admin = await newOperator(h, { role: 'administrator' });
  const doc = (await call(h.url, 'GET', '/openapi.json')).body as Json;
  const routes = (await allRoutes(h.deps)).filter((r: AnyRoute) => !r.hidden);
  t.true(routes.length > 20);

  const tokenFor = (r: AnyRoute): { right?: string; wrong?: string } => {
    switch (r.auth) {
      case 'none':
        return {};
      case 'consumer-or-operator':
        // Both kinds are right: no token of another kind exists.
        return { right: consumer.token };
      case 'consumer':
      case 'consumer:self':
        return { right: consumer.token, wrong: operator.token };
      case 'administrator':
        return { right: admin.token, wrong: operator.token };
      default:
        return { right: operator.token, wrong: consumer.token };
    }
  };
  const pathOf = (r: AnyRoute) =>
    r.path.replace(/\{(\w+)\}/g, (_m: string, name: string) => {
      if (r.auth === 'consumer:self' && name === 'id') return consumer.userId;
      const props = (r.params as Json | undefined)?.properties as Json | undefined;
      return encodeURIComponent(sampleParam(props?.[name], 'x'));
    });

  const undeclared: string[] = [];
  const seen = new Map<string, Set<number>>();
  for (const r of routes) {
    const declared = Object.keys(doc.paths[r.path]?.[r.method.toLowerCase()]?.responses ?? {});
    const url = pathOf(r);
    const { right, wrong } = tokenFor(r);
    const probes: Array<[string, Parameters<typeof call>[3]]> = [];
    if (r.auth !== 'none') {
      probes.push(['no token', {}]);
      probes.push(['a token of another kind', { token: wrong }]);
    }
    probes.push(['an unknown query parameter', { token: right }]);
    if (r.body || r.multipart) {
      probes.push(['a text/plain body', { token: right, rawBody: 'hello', headers: { 'content-type': 'text/plain' } }]);
      probes.push(
        r.body
          ? [
              'a JSON body over the limit',
              { token: right, rawBody: JSON.stringify({ pad: 'x'.repeat(70 * 1024) }), headers: { 'content-type': 'application/json' } },
            ]
          : ['an upload over the limit', { token: right, form: { file: { data: Buffer.alloc(MAX_UPLOAD_BYTES + 10_000, 1) } } }],
      );
    }
    for (const [what, opts] of probes) {
      const target = what === 'an unknown query parameter' ? `${url}?unexpectedParameter=1` : url;
      const res = await call(h.url, r.method, target, opts);
      const key = `${r.method} ${r.path}`;
      seen.set(key, (seen.get(key) ?? new Set()).add(res.status));
      if (res.status < 400) {
        undeclared.push(`${key} with ${what}: ${res.status} (expected a refusal)`);
        continue;
      }
      if (typeof res.body?.error !== 'string') undeclared.push(`${key} with ${what}: ${res.status} without the error envelope`);
      if (!declared.includes(String(res.status)))
        undeclared.push(`${key} with ${what}: ${res.status} ${res.body?.error} not declared (declared: ${declared.join(', ')})`);
    }
  }
  t.deepEqual(undeclared, []);
  // The refusals the probes are meant to reach were reached (the proxy's finding among them).
  t.true(seen.get('POST /auth/otp/request')?.has(415));
  t.true(seen.get('POST /auth/operator/login')?.has(415));
  t.true(seen.get('POST /auth/otp/request')?.has(413));
  t.true([...seen.values()].some((s) => s.has(401)));
});

test('the statuses every route can answer whatever its input are declared on every operation', async (t) => {
  const doc = (await call(h.url, 'GET', '/openapi.json')).body as Json;
  const missing: string[] = [];
  for (const [p, ops] of Object.entries(doc.paths as Json)) {
    for (const [method, op] of Object.entries(ops as Json)) {
      // 500: an unexpected failure; 503: PostgreSQL or Redis unreachable; 400: an unknown query parameter.
      for (const status of ['400', '500', '503']) if (!(status in (op as Json).responses)) missing.push(`${method.toUpperCase()} ${p}: ${status}`);
    }
  }
  t.deepEqual(missing, []);
});
