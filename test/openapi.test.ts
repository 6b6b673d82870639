/** GET /openapi.json is a valid OpenAPI 3.1 document generated from the route table's schemas. */
import { Validator } from '@seriousme/openapi-schema-validator';
import test from 'ava';
import { koaPath } from '../platform/http/route-table.js';
import { useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';

const h = useHarness(test);

test('the served document passes a real OpenAPI 3.1 validator', async (t) => {
  const res = await client(h.url).get('/openapi.json');
  t.is(res.status, 200);
  t.is(res.body.openapi, '3.1.0');
  const validator = new Validator();
  const result = await validator.validate(res.body);
  t.deepEqual(result.errors ?? [], [], JSON.stringify(result.errors, null, 2));
  t.true(result.valid);
});

test('every route of the table is in the document with its method, and only those', async (t) => {
  const doc = (await client(h.url).get('/openapi.json')).body;
  const documented = new Set<string>();
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    for (const method of Object.keys(ops)) documented.add(`${method.toUpperCase()} ${path}`);
  }
  const table = new Set(h.web.app.routes.filter((r) => !r.hidden).map((r) => `${r.method} ${r.path}`));
  t.deepEqual([...documented].sort(), [...table].sort());
  t.true(table.has('GET /health') && table.has('GET /openapi.json'));
  // OpenAPI paths use {param}; the router uses :param — one table, two spellings.
  t.is(koaPath('/users/{id}/history'), '/users/:id/history');
});

test('protected operations declare bearer security and the error envelope', async (t) => {
  const doc = (await client(h.url).get('/openapi.json')).body;
  const op = doc.paths['/settings/attestation-required'].get;
  t.deepEqual(op.security, [{ bearerAuth: [] }]);
  t.truthy(op.responses['401']);
  t.is(op.responses['401'].content['application/json'].schema.$ref, '#/components/schemas/Error');
  t.deepEqual(doc.components.schemas.Error.required.sort(), ['error', 'message']);
  // Public operations declare that they need nothing (Redocly's security-defined rule).
  t.deepEqual(doc.paths['/health'].get.security, []);
});
