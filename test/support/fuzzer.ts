/**
 * An OpenAPI-driven HTTP fuzzer built on fast-check: for every operation of the service's own OpenAPI
 * document it generates requests that are near-valid (derived from the route's schemas, then one part
 * mutated) or outright malformed — bodies, query strings, path ids, headers, bearer tokens of every kind
 * (none, each real principal, forged, expired, wrong audience, odd claims) and multipart parts — sends
 * them to a running service and checks each answer:
 *   - never a 5xx;
 *   - every 4xx carries the `{ error, message }` envelope (JSON, both strings);
 *   - every request is answered within `hangMs` (no hang).
 * fast-check draws the requests from a seed (printed with every failure, so a run replays exactly).
 * Used by test/fuzz.test.ts (a short run in npm test) and chaos/fuzz.ts (`npm run chaos`, 20,000+).
 */
import http from 'node:http';
import fc from 'fast-check';

type Json = Record<string, any>;

export interface FuzzPrincipals {
  /** Bearer tokens by kind; a kind may hold several. */
  tokens: Record<string, string[]>;
  /** Ids that exist, by kind (used as path ids). */
  ids: { users: string[]; operators: string[]; referenceIds: string[]; disputes: string[] };
}

export interface FuzzOptions {
  baseUrl: string;
  openapi: Json;
  /** Fresh principals (called at the start and every `refreshEvery` requests: fuzzing may lock, deactivate or delete them). */
  principals: () => Promise<FuzzPrincipals>;
  runs: number;
  seed?: number;
  concurrency?: number;
  hangMs?: number;
  refreshEvery?: number;
  /** Images the face routes may receive now and then (a valid one exercises the whole face path). */
  images?: Buffer[];
  /** Extra paths that are not in the OpenAPI document (hidden routes, unknown paths). */
  extraPaths?: string[];
  /** Progress callback (every 1,000 requests). */
  onProgress?: (done: number) => void;
}

export interface FuzzFailure {
  kind: '5xx' | 'no-envelope' | 'hang' | 'transport';
  request: { method: string; path: string; headers: Record<string, string>; bodyPreview: string };
  status?: number;
  answer?: string;
}

export interface FuzzReport {
  seed: number;
  requests: number;
  /** Requests the client itself refused to send (e.g. a header value Node's client will not write). */
  notSent: number;
  byStatus: Record<string, number>;
  byOperation: Record<string, number>;
  /** Milliseconds spent per operation (sum), to see where a run's time goes. */
  msByOperation: Record<string, number>;
  failures: FuzzFailure[];
  hangs: number;
  maxMs: number;
  seconds: number;
}

interface Operation {
  method: string;
  path: string;
  op: Json;
}

interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  label: string;
}

// ---- values ------------------------------------------------------------------------------------------

/** Strings that have broken servers: NUL, lone surrogates, control characters, huge, injection shapes. */
const nastyString = fc.oneof(
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '\ud800',
    '\udfff',
    'x\ud83d',
    '\u202e',
    '\ufeff',
    '\r\n',
    '\t',
    '%00',
    '%',
    '%ff',
    '..',
    '../../etc/passwd',
    "' OR '1'='1",
    '"; DROP TABLE users; --',
    '${jndi:x}',
    '<script>alert(1)</script>',
    '__proto__',
    'constructor',
    'null',
    'true',
    'NaN',
    '-1',
    '0',
    '1e309',
    '9'.repeat(400),
    '😀'.repeat(50),
    'ä'.repeat(300),
    ' ',
    '',
    '=cmd|" /C calc"!A0',
    '\\',
    '\\u0000',
  ),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.constantFrom(1_000, 70_000, 300_000).map((n) => 'A'.repeat(n)),
);

/** Nasty strings for the places a URL carries them (huge ones only rarely: they all end as 431). */
const nastyUrlString = fc.oneof(
  { weight: 60, arbitrary: nastyString.filter((s) => s.length < 2000) },
  { weight: 1, arbitrary: fc.constant('A'.repeat(20_000)) },
);

const nastyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 5, arbitrary: nastyString },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, -0, Number.MAX_SAFE_INTEGER + 2) },
  { weight: 1, arbitrary: fc.array(nastyString, { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('__proto__', 'constructor', 'a', '$where', ''), nastyString, { maxKeys: 2 }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.constant(deepNest(200)) },
);

function deepNest(depth: number): unknown {
  let v: unknown = 'x';
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

const isoDate = fc.date({ min: new Date('1900-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true });

/** A value that satisfies a JSON schema (the subset TypeBox emits), as far as a generator can tell. */
function validValue(schema: Json | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 5) return fc.constant('x');
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum);
  if (Array.isArray(schema.anyOf)) return fc.oneof(...schema.anyOf.map((s: Json) => validValue(s, depth + 1)));
  if (Array.isArray(schema.oneOf)) return fc.oneof(...schema.oneOf.map((s: Json) => validValue(s, depth + 1)));
  if (Array.isArray(schema.allOf) && schema.allOf.length) return validValue(schema.allOf[0], depth + 1);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string': {
      if (schema.format === 'uuid') return fc.uuid();
      if (schema.format === 'date') return isoDate.map((d) => d.toISOString().slice(0, 10));
      if (schema.format === 'date-time') return isoDate.map((d) => d.toISOString());
      if (typeof schema.pattern === 'string') {
        try {
          return fc.stringMatching(new RegExp(schema.pattern)).filter((s) => s.length <= (schema.maxLength ?? 1e6) && s.length >= (schema.minLength ?? 0));
        } catch {
          return fc.string();
        }
      }
      return fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 64) });
    }
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 100_000 });
    case 'number':
      return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(validValue(schema.items, depth + 1), { maxLength: 3 });
    case 'object': {
      const props = (schema.properties ?? {}) as Record<string, Json>;
      const required = new Set<string>(schema.required ?? []);
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [k, s] of Object.entries(props)) {
        if (s.contentMediaType) continue; // multipart file parts are generated apart
        model[k] = validValue(s, depth + 1);
      }
      return fc.record(model, { requiredKeys: Object.keys(model).filter((k) => required.has(k)) });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** A near-valid object: valid, then one of its fields replaced, removed, or a stranger added. */
function mutatedObject(schema: Json | undefined): fc.Arbitrary<unknown> {
  const base = validValue(schema ?? { type: 'object' });
  return fc.tuple(base, fc.nat(), nastyValue, fc.constantFrom('replace', 'remove', 'add', 'keep', 'keep')).map(([v, n, nasty, how]) => {
    if (!v || typeof v !== 'object' || Array.isArray(v)) return nasty;
    const obj = { ...(v as Record<string, unknown>) };
    const keys = Object.keys(obj);
    if (how === 'replace' && keys.length) obj[keys[n % keys.length]!] = nasty;
    else if (how === 'remove' && keys.length) delete obj[keys[n % keys.length]!];
    else if (how === 'add') obj[['extra', 'name', 'role', '__proto__', 'dateOfBirth'][n % 5]!] = nasty;
    return obj;
  });
}

// ---- requests ------------------------------------------------------------------------------------------

/** Percent-encoding that never throws (a lone surrogate becomes U+FFFD's bytes, as a client would send). */
function pct(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8'))
    out += /[A-Za-z0-9\-_.~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

/** Already-encoded oddities for paths and query strings: NUL, invalid UTF-8, overlong forms, bad escapes. */
const RAW_ENCODED = ['%00', '%ED%A0%80', '%C0%80', '%FF%FE', '%', '%G1', '%25', '%2F', '%E2%80%AE'];

const TOKEN_KINDS_FOR_GARBAGE = [
  'Bearer',
  'Bearer ',
  'Basic dXNlcjpwYXNz',
  'bearer x.y.z',
  'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.',
  'Bearer a b',
  'Token abc',
];

/** The token kind a route asks for, read from its OpenAPI description ("**Authorisation:** ..."). */
function wantedKinds(op: Json): string[] {
  const text = String(op.description ?? '');
  if (/\*\*Authorisation:\*\* Administrator/.test(text)) return ['administrator'];
  if (/\*\*Authorisation:\*\* Operator/.test(text)) return ['operator', 'administrator'];
  if (/\*\*Authorisation:\*\* Consumer/.test(text)) return ['consumer'];
  return [];
}

function authorizationHeader(principals: FuzzPrincipals, op?: Json): fc.Arbitrary<string | undefined> {
  const kinds = Object.keys(principals.tokens).filter((k) => principals.tokens[k]!.length);
  const wanted = (op ? wantedKinds(op) : []).filter((k) => principals.tokens[k]?.length);
  const tokenOf = (list: string[]) => fc.constantFrom(...list).chain((k) => fc.constantFrom(...principals.tokens[k]!));
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(undefined) },
    // The right kind for the route most of the time, so that the fuzz reaches the handlers.
    ...(wanted.length ? [{ weight: 12, arbitrary: tokenOf(wanted).map((t) => `Bearer ${t}`) }] : []),
    { weight: 6, arbitrary: tokenOf(kinds).map((t) => `Bearer ${t}`) },
    { weight: 1, arbitrary: fc.constantFrom(...TOKEN_KINDS_FOR_GARBAGE) },
    {
      weight: 1,
      // A real token with one character changed (signature, claims or header).
      arbitrary: fc
        .tuple(tokenOf(kinds), fc.nat(), fc.constantFrom('A', '_', '-', '.', '='))
        .map(([t, i, c]) => `Bearer ${t.slice(0, i % t.length)}${c}${t.slice((i % t.length) + 1)}`),
    },
    {
      weight: 1,
      arbitrary: fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 200 }).map((s) => `Bearer ${s}`),
    },
  );
}

function pathFor(template: string, principals: FuzzPrincipals): fc.Arbitrary<string> {
  const names = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  if (!names.length) return fc.constant(template);
  const known = [...principals.ids.users, ...principals.ids.operators, ...principals.ids.referenceIds, ...principals.ids.disputes];
  const segment = fc.oneof(
    { weight: 4, arbitrary: known.length ? fc.constantFrom(...known) : fc.uuid() },
    { weight: 2, arbitrary: fc.uuid() },
    { weight: 1, arbitrary: fc.stringMatching(/^[0-9]{11}$/) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('default', '%00', '%ff', '%2e%2e', '..%2f', 'x'.repeat(300), '-1', '0', '%E2%80%AE', '%F0%9F%98%80', 'null', '%25', '%'),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 20 }).map(pct) },
    { weight: 1, arbitrary: fc.constantFrom(...RAW_ENCODED) },
  );
  return fc.array(segment, { minLength: names.length, maxLength: names.length }).map((values) => {
    let p = template;
    names.forEach((n, i) => (p = p.replace(`{${n}}`, values[i]!)));
    return p;
  });
}

function queryFor(op: Json): fc.Arbitrary<string> {
  const params = ((op.parameters ?? []) as Json[]).filter((p) => p.in === 'query');
  const pairs: fc.Arbitrary<[string, string][]> = fc.oneof(
    // Near-valid: each parameter valid or junk.
    fc
      .tuple(
        ...params.map((p) =>
          fc
            .option(fc.oneof({ weight: 3, arbitrary: validValue(p.schema).map(String) }, { weight: 1, arbitrary: nastyUrlString }), { nil: undefined })
            .map((v) => [p.name, v] as const),
        ),
      )
      .map((entries) => entries.filter(([, v]) => v !== undefined) as [string, string][]),
    // Unknown or repeated keys.
    fc.array(fc.tuple(fc.constantFrom('page', 'pageSize', 'from', 'to', 'name', 'x', '__proto__', 'includePhoto', 'status', ''), nastyUrlString), {
      maxLength: 4,
    }),
  );
  return fc.tuple(pairs, fc.option(fc.constantFrom(...RAW_ENCODED), { freq: 8, nil: undefined })).map(([list, raw]) => {
    const parts = list.map(([k, v]) => `${pct(k)}=${pct(v)}`);
    if (raw !== undefined) parts.push(`${params[0]?.name ?? 'x'}=${raw}`);
    return parts.length ? `?${parts.join('&')}` : '';
  });
}

type BodyPart = { body?: Buffer; contentType?: string };

function jsonBodyFor(op: Json): fc.Arbitrary<BodyPart> {
  const schema = op.requestBody?.content?.['application/json']?.schema as Json | undefined;
  const json = (v: unknown) => Buffer.from(JSON.stringify(v) ?? 'null');
  return fc.oneof(
    { weight: 6, arbitrary: mutatedObject(schema).map((v): BodyPart => ({ body: json(v), contentType: 'application/json' })) },
    { weight: 2, arbitrary: validValue(schema).map((v): BodyPart => ({ body: json(v), contentType: 'application/json' })) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('{', '{"a":', '[1,2', '"\\ud800"', '{"a":"\\u0000"}', 'null', '[]', '1', '{"__proto__":{"x":1}}', '\u0000', '{}'.padEnd(70_000, ' '))
        .map((s): BodyPart => ({ body: Buffer.from(s), contentType: 'application/json' })),
    },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data', 'application/json; charset=latin1', 'application/xml', '')
        .map((ct): BodyPart => ({ body: Buffer.from('a=1&b=2'), contentType: ct })),
    },
    { weight: 1, arbitrary: fc.constant<BodyPart>({}) },
  );
}

const PNG_HEADER = Buffer.from('89504e470d0a1a0a', 'hex');

function fileBytes(images: Buffer[]): fc.Arbitrary<Buffer> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.uint8Array({ maxLength: 2048 }).map((a) => Buffer.from(a)) },
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 512 }).map((a) => Buffer.concat([PNG_HEADER, Buffer.from(a)])) },
    { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
    {
      weight: 1,
      arbitrary: images.length
        ? fc.constantFrom(...images).chain((img) => fc.nat(img.length).map((n) => img.subarray(0, Math.max(8, n))))
        : fc.constant(Buffer.alloc(0)),
    },
    // A whole real image now and then: the face path end to end.
    { weight: images.length ? 1 : 0, arbitrary: images.length ? fc.constantFrom(...images) : fc.constant(Buffer.alloc(0)) },
  );
}

function multipartBodyFor(op: Json, images: Buffer[]): fc.Arbitrary<BodyPart> {
  const schema = op.requestBody?.content?.['multipart/form-data']?.schema as Json;
  const props = (schema?.properties ?? {}) as Record<string, Json>;
  const fileNames = Object.keys(props).filter((k) => props[k]!.contentMediaType);
  const fieldSchema = { ...schema, properties: Object.fromEntries(Object.entries(props).filter(([, s]) => !s.contentMediaType)) };
  const part = fc.record({
    name: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...(fileNames.length ? fileNames : ['file'])) },
      { weight: 1, arbitrary: fc.constantFrom('file', 'image', 'photo', 'other', '', 'a"b', 'x\u0000') },
    ),
    filename: fc.constantFrom('a.jpg', 'a.png', '', '../../x', 'x\u0000.jpg', 'ä.webp', 'a'.repeat(300)),
    type: fc.constantFrom('image/jpeg', 'image/png', 'image/webp', 'application/octet-stream', 'text/plain', ''),
    data: fileBytes(images),
  });
  return fc
    .tuple(
      fc.oneof({ weight: 3, arbitrary: validValue(fieldSchema) }, { weight: 2, arbitrary: mutatedObject(fieldSchema) }),
      fc.array(part, { maxLength: 3 }),
      fc.constantFrom('ok', 'ok', 'ok', 'ok', 'many-fields', 'duplicate', 'no-boundary', 'wrong-boundary', 'truncated', 'not-multipart'),
    )
    .map(([fields, files, shape]) => {
      const boundary = 'fuzzb0undary';
      const chunks: Buffer[] = [];
      const add = (name: string, value: string) =>
        chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
      const entries =
        fields && typeof fields === 'object' && !Array.isArray(fields)
          ? Object.entries(fields as Record<string, unknown>)
          : [['x', JSON.stringify(fields)] as [string, unknown]];
      for (const [k, v] of entries) add(k, typeof v === 'string' ? v : (JSON.stringify(v) ?? ''));
      if (shape === 'many-fields') for (let i = 0; i < 25; i++) add(`f${i}`, 'x');
      if (shape === 'duplicate' && entries[0]) add(entries[0][0], 'again');
      for (const f of files) {
        chunks.push(
          Buffer.from(
            `--${boundary}\r\nContent-Disposition: form-data; name="${f.name}"; filename="${f.filename}"\r\n${f.type ? `Content-Type: ${f.type}\r\n` : ''}\r\n`,
          ),
        );
        chunks.push(f.data, Buffer.from('\r\n'));
      }
      chunks.push(Buffer.from(`--${boundary}--\r\n`));
      let body = Buffer.concat(chunks);
      let contentType = `multipart/form-data; boundary=${boundary}`;
      if (shape === 'no-boundary') contentType = 'multipart/form-data';
      if (shape === 'wrong-boundary') contentType = 'multipart/form-data; boundary=other';
      if (shape === 'truncated') body = body.subarray(0, Math.floor(body.length / 2));
      if (shape === 'not-multipart') contentType = 'application/json';
      return { body, contentType };
    });
}

function headersArb(): fc.Arbitrary<Record<string, string>> {
  const printable = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
  return fc.dictionary(
    fc.constantFrom(
      'accept',
      'accept-encoding',
      'x-request-id',
      'x-forwarded-for',
      'user-agent',
      'origin',
      'cookie',
      'range',
      'if-none-match',
      'x-custom',
      'content-encoding',
      'accept-language',
    ),
    fc.oneof(
      {
        weight: 50,
        arbitrary: fc.constantFrom(
          '*/*',
          'gzip, br',
          'text/html',
          '../../x',
          'bytes=0-1',
          'faceid_admin_ui=abc',
          '127.0.0.1, 10.0.0.1',
          'deflate',
          '',
          '\u00e4\u00f6',
        ),
      },
      { weight: 50, arbitrary: fc.string({ unit: printable, maxLength: 64 }) },
      { weight: 1, arbitrary: fc.constant('x'.repeat(20_000)) },
    ),
    { maxKeys: 3 },
  );
}

function requestArb(operations: Operation[], principals: FuzzPrincipals, images: Buffer[], extraPaths: string[]): fc.Arbitrary<FuzzRequest> {
  const perOperation = operations.map(({ method, path, op }) => {
    const content = op.requestBody?.content ?? {};
    const body = content['multipart/form-data']
      ? multipartBodyFor(op, images)
      : content['application/json']
        ? jsonBodyFor(op)
        : fc.oneof({ weight: 4, arbitrary: fc.constant<BodyPart>({}) }, { weight: 1, arbitrary: jsonBodyFor(op) });
    return fc
      .record({
        path: pathFor(path, principals),
        query: queryFor(op),
        body,
        auth: authorizationHeader(principals, op),
        headers: headersArb(),
        method: fc.oneof(
          { weight: 12, arbitrary: fc.constant(method) },
          { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD') },
        ),
      })
      .map(({ path: p, query, body: b, auth, headers, method: m }): FuzzRequest => {
        const h: Record<string, string> = { ...headers };
        if (auth !== undefined) h.authorization = auth;
        if (b.contentType !== undefined && b.contentType !== '') h['content-type'] = b.contentType;
        return { method: m, path: p + query, headers: h, body: b.body, label: `${method.toUpperCase()} ${path}` };
      });
  });
  const unknown = fc
    .record({
      path: fc.constantFrom(...extraPaths, '/', '/nope', '/users', '/%00', '/api', '/admin/queues/api/queues', '/openapi.json/x'),
      auth: authorizationHeader(principals),
      method: fc.constantFrom('GET', 'POST', 'DELETE'),
    })
    .map(({ path, auth, method }): FuzzRequest => ({ method, path, headers: auth ? { authorization: auth } : {}, label: 'other paths' }));
  return fc.oneof(...perOperation.map((a) => ({ weight: 10, arbitrary: a })), { weight: 3, arbitrary: unknown });
}

// ---- sending -------------------------------------------------------------------------------------------

function send(
  baseUrl: string,
  req: FuzzRequest,
  hangMs: number,
  agent: http.Agent,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string; ms: number } | { hang: true } | { notSent: string } | { transport: string }> {
  const url = new URL(baseUrl);
  const started = performance.now();
  return new Promise((resolve) => {
    let done = false;
    const pending: { timer?: NodeJS.Timeout } = {};
    const finish = (v: Parameters<typeof resolve>[0]) => {
      if (!done) {
        done = true;
        clearTimeout(pending.timer);
        resolve(v);
      }
    };
    let r: http.ClientRequest;
    try {
      const headers: Record<string, string | number> = { ...req.headers };
      if (req.body) headers['content-length'] = req.body.length;
      r = http.request({ host: url.hostname, port: url.port, method: req.method, path: req.path, headers, agent });
    } catch (e) {
      finish({ notSent: (e as Error).message });
      return;
    }
    pending.timer = setTimeout(() => {
      r.destroy();
      finish({ hang: true });
    }, hangMs);
    r.on('error', (e: NodeJS.ErrnoException) =>
      finish(e.code === 'ERR_INVALID_CHAR' || e.code === 'ERR_INVALID_HTTP_TOKEN' ? { notSent: e.message } : { transport: `${e.code ?? ''} ${e.message}` }),
    );
    r.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        finish({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), ms: performance.now() - started }),
      );
      res.on('error', (e) => finish({ transport: e.message }));
    });
    r.end(req.body);
  });
}

function envelopeOk(method: string, headers: http.IncomingHttpHeaders, text: string): boolean {
  if (method === 'HEAD') return true; // HEAD answers carry no body
  if (!String(headers['content-type'] ?? '').includes('application/json')) return false;
  try {
    const body = JSON.parse(text) as { error?: unknown; message?: unknown };
    return typeof body.error === 'string' && body.error.length > 0 && typeof body.message === 'string';
  } catch {
    return false;
  }
}

export function operationsOf(openapi: Json): Operation[] {
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries(openapi.paths as Record<string, Json>)) {
    for (const [method, op] of Object.entries(methods)) ops.push({ method: method.toUpperCase(), path, op: op as Json });
  }
  return ops;
}

export async function runFuzz(opts: FuzzOptions): Promise<FuzzReport> {
  const seed = opts.seed ?? Date.now() % 2 ** 31;
  const concurrency = opts.concurrency ?? 8;
  const hangMs = opts.hangMs ?? 20_000;
  const refreshEvery = opts.refreshEvery ?? 500;
  const operations = operationsOf(opts.openapi);
  // A connection per request: a keep-alive socket the server closed a moment ago would make a client-side
  // ECONNRESET race that says nothing about the server.
  const agent = new http.Agent({ keepAlive: false, maxSockets: concurrency });
  const report: FuzzReport = { seed, requests: 0, notSent: 0, byStatus: {}, byOperation: {}, msByOperation: {}, failures: [], hangs: 0, maxMs: 0, seconds: 0 };
  const started = performance.now();
  let batchSeed = seed;
  try {
    for (let done = 0; done < opts.runs;) {
      const n = Math.min(refreshEvery, opts.runs - done);
      const principals = await opts.principals();
      const requests = fc.sample(requestArb(operations, principals, opts.images ?? [], opts.extraPaths ?? []), { numRuns: n, seed: batchSeed++ });
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < requests.length) {
            const req = requests[next++]!;
            const answer = await send(opts.baseUrl, req, hangMs, agent);
            const preview = {
              method: req.method,
              path: req.path.slice(0, 300),
              headers: Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, v.slice(0, 120)])),
              bodyPreview: (req.body ?? Buffer.alloc(0)).subarray(0, 300).toString('latin1'),
            };
            if ('notSent' in answer) {
              report.notSent++;
              continue;
            }
            report.requests++;
            report.byOperation[req.label] = (report.byOperation[req.label] ?? 0) + 1;
            if ('hang' in answer) {
              report.hangs++;
              report.failures.push({ kind: 'hang', request: preview });
              continue;
            }
            if ('transport' in answer) {
              report.failures.push({ kind: 'transport', request: preview, answer: answer.transport });
              continue;
            }
            report.byStatus[answer.status] = (report.byStatus[answer.status] ?? 0) + 1;
            report.maxMs = Math.max(report.maxMs, answer.ms);
            report.msByOperation[req.label] = Math.round((report.msByOperation[req.label] ?? 0) + answer.ms);
            if (answer.status >= 500) report.failures.push({ kind: '5xx', request: preview, status: answer.status, answer: answer.text.slice(0, 300) });
            else if (answer.status >= 400 && !envelopeOk(req.method, answer.headers, answer.text)) {
              report.failures.push({ kind: 'no-envelope', request: preview, status: answer.status, answer: answer.text.slice(0, 300) });
            }
          }
        }),
      );
      done += n;
      if (Math.floor(done / 1000) > Math.floor((done - n) / 1000)) opts.onProgress?.(done);
    }
  } finally {
    agent.destroy();
  }
  report.seconds = (performance.now() - started) / 1000;
  return report;
}
