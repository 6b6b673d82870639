/**
 * The authorisation matrix, generated from the route table (`h.web.app.routes`): every route is called
 * by seven callers (no token, a consumer, another consumer, an operator, a flagged operator, a
 * deactivated operator, an administrator) and must answer exactly what its rule gives:
 *
 *   rule \ caller        none  consumer  other consumer  operator  flagged  deactivated  admin
 *   none                 ok    ok        ok              ok        ok       ok           ok
 *   consumer             401   ok        ok              401       401      401          401
 *   consumer:self        401   ok        403 forbidden   401       401      401          401
 *   operator             401   401       401             ok        403 prr  403 deact    ok
 *   operator:flagged-ok  401   401       401             ok        ok       403 deact    ok
 *   administrator        401   401       401             403 forb  403 prr  403 deact    ok
 *
 * (401 `unauthorized`; prr = `password_reset_required`; deact = `operator_deactivated`.) "ok" means the
 * caller got past authorisation: anything but 401/403 (the request carries an unknown body key, so a
 * handler behind a strict body schema never runs and the answer is a harmless 400/404/415). Routes
 * with `auth: 'none'` answer nobody 401/403, except PATCH /settings/attestation-required: always 403
 * `setting_immutable`.
 *
 * The rule each route must have comes from the interface document (DOCUMENTED below), not from the
 * route itself: a route declared with another rule fails here, and so does a route added to the table
 * without a row in DOCUMENTED or PROJECT_ROUTES. Documented routes not built yet are logged and join
 * the matrix by themselves once they are in the table.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import type { TSchema } from '@sinclair/typebox';
import type { AnyRoute, AuthRule } from '../platform/http/route-table.js';
import { check } from '../platform/http/validation.js';
import { startHarness, type Harness } from './helpers/harness.js';
import { client, type FormFile, type RequestOptions } from './helpers/http.js';
import { newConsumer, newOperator } from './helpers/principals.js';

/** Every route of the interface document (and SPEC sections 2 and 10), with its rule. */
const DOCUMENTED: Record<string, AuthRule> = {
  'POST /auth/otp/request': 'none',
  'POST /auth/otp/verify': 'none',
  'POST /auth/operator/login': 'none',
  'POST /auth/operator/set-password': 'operator:flagged-ok',
  'POST /auth/refresh': 'none',
  'POST /auth/logout': 'none',
  'GET /health': 'none',
  'GET /models': 'none',
  'GET /metrics': 'none',
  'GET /settings/attestation-required': 'administrator',
  'PATCH /settings/attestation-required': 'none',
  'GET /users/{id}': 'consumer:self',
  'PATCH /users/{id}': 'consumer:self',
  'DELETE /users/{id}': 'consumer:self',
  'GET /users/{id}/history': 'consumer:self',
  'GET /users/{id}/history/export': 'consumer:self',
  'GET /users/{id}/preferences': 'consumer:self',
  'PATCH /users/{id}/preferences': 'consumer:self',
  'POST /identity/nin/validate': 'consumer',
  'POST /identity/bvn/validate': 'consumer',
  'POST /identity/nin/verify-face': 'consumer',
  'POST /identity/bvn/verify-face': 'consumer',
  'POST /identity/nin/link': 'consumer',
  'POST /identity/bvn/link': 'consumer',
  'POST /identify': 'operator',
  'POST /identify/{referenceId}/escalate': 'operator',
  'POST /verify/self': 'consumer',
  'POST /operators': 'administrator',
  'POST /operators/{id}/reset-password': 'administrator',
  'PATCH /operators/{id}': 'administrator',
  'DELETE /operators/{id}': 'administrator',
  'GET /operators/{id}/sessions': 'administrator',
  'GET /analytics/accuracy': 'administrator',
  'GET /analytics/volume': 'administrator',
  'GET /billing/{orgId}': 'administrator',
  'POST /disputes': 'consumer',
  'GET /disputes': 'administrator',
  'PATCH /disputes/{id}': 'administrator',
  'GET /api/nin/{nin}': 'none',
  'GET /api/bvn/{bvn}': 'none',
  'POST /api/enroll': 'none',
  'GET /api/search': 'none',
  'GET /api/stats': 'none',
  // SPEC section 11 (second round), for the consoles.
  'GET /operators': 'administrator',
  'GET /operators/{id}': 'administrator',
  'GET /audit-events': 'administrator',
  // SPEC section 12.4: the right of access.
  'GET /users/{id}/export': 'consumer:self',
  // SPEC section 12.6: webhooks.
  'POST /webhooks/endpoints': 'administrator',
  'GET /webhooks/endpoints': 'administrator',
  'GET /webhooks/endpoints/{id}': 'administrator',
  'PATCH /webhooks/endpoints/{id}': 'administrator',
  'DELETE /webhooks/endpoints/{id}': 'administrator',
  'POST /webhooks/endpoints/{id}/rotate-secret': 'administrator',
  'GET /webhooks/endpoints/{id}/deliveries': 'administrator',
  'POST /webhooks/events/{eventId}/replay': 'administrator',
  // SPEC section 12.2 (third round).
  'POST /auth/operator/mfa/setup': 'operator:mfa-setup',
  'POST /auth/operator/mfa/confirm': 'operator:mfa-setup',
  'POST /operators/{id}/reset-mfa': 'administrator',
  // SPEC section 12.5: duplicate identities and the watch-list.
  'GET /dedupe/cases': 'administrator',
  'GET /dedupe/cases/{id}': 'administrator',
  'PATCH /dedupe/cases/{id}': 'administrator',
  'POST /watchlist': 'administrator',
  'GET /watchlist': 'administrator',
  'DELETE /watchlist/{id}': 'administrator',
  // SPEC section 13.1: liveness sessions.
  'POST /liveness/sessions': 'consumer-or-operator',
  'POST /liveness/sessions/{id}/frames': 'consumer-or-operator',
};

/** Routes of this project beyond the document (docs/decisions.md says why each exists). */
const PROJECT_ROUTES: Record<string, AuthRule> = {
  'GET /openapi.json': 'none',
  // The balancer's readiness check: whether this process's own links answer (docs/deployment.md).
  'GET /health/ready': 'none',
  'POST /admin/queues/session': 'administrator',
  'DELETE /admin/queues/session': 'none',
  // The search desk's own past searches (docs/console.md).
  'GET /identify/mine': 'operator',
  // A case's review evidence, and listing a confirmed case's face (docs/dedupe.md).
  'GET /dedupe/cases/{id}/capture': 'administrator',
  'POST /dedupe/cases/{id}/watchlist': 'administrator',
};

/** The one route whose answer is fixed whoever calls. */
const ALWAYS_403 = new Map([['PATCH /settings/attestation-required', 'setting_immutable']]);
/** Routes that ask an admitted caller for a step-up proof besides the bearer: its 403 is not a refusal of the rule. */
const STEP_UP = new Map([['GET /users/{id}/export', 'proof_token_invalid']]);

/**
 * Requests that pass parsing, precheck and schema validation, for the callers whose refusal comes from
 * the stateful check (flagged, deactivated, non-administrator operators): the router validates before
 * that check, so an invalid body would be answered 400 first. Needed only where an empty request is
 * not valid; each sample is itself checked against the route's schemas below.
 */
const PNG_1X1 = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
interface Sample {
  json?: Record<string, unknown>;
  query?: string;
  form?: Record<string, string | FormFile | FormFile[]>;
}
const VALID_SAMPLES: Record<string, Sample> = {
  'POST /auth/operator/set-password': { json: { currentPassword: 'matrix-current', newPassword: 'matrix-new-password' } },
  'POST /operators': { json: { identifier: 'matrix-sample', displayName: 'Matrix Sample' } },
  'PATCH /operators/{id}': { json: { displayName: 'Matrix Sample' } },
  'POST /auth/operator/mfa/confirm': { json: { code: '000000', password: 'not-the-password' } },
  'POST /auth/operator/mfa/setup': { json: { password: 'not-the-password' } },
  'PATCH /disputes/{id}': { json: { status: 'investigating' } },
  'POST /webhooks/endpoints': { json: { url: 'https://hooks.example.com/matrix', events: ['user.deleted'] } },
  'PATCH /webhooks/endpoints/{id}': { json: { description: 'matrix sample' } },
  'PATCH /dedupe/cases/{id}': { json: { status: 'dismissed' } },
  'POST /dedupe/cases/{id}/watchlist': { json: { reason: 'matrix sample' } },
  'POST /watchlist': { form: { reason: 'matrix sample', file: { data: PNG_1X1, filename: 'face.png', type: 'image/png' } } },
  'POST /identify': { form: { attestation: 'true', file: { data: PNG_1X1, filename: 'probe.png', type: 'image/png' } } },
  'POST /liveness/sessions/{id}/frames': { form: { frames: [1, 2, 3].map((i) => ({ data: PNG_1X1, filename: `frame${i}.png`, type: 'image/png' })) } },
};

/** Values for path parameters other than a consumer:self `{id}` (which is always the first consumer's id). */
const PARAM_VALUES: Record<string, () => string> = {
  orgId: () => 'default',
  nin: () => '00000000000',
  bvn: () => '00000000000',
};

type Caller = 'none' | 'consumer' | 'otherConsumer' | 'operator' | 'flaggedOperator' | 'deactivatedOperator' | 'administrator';
const CALLERS: Caller[] = ['none', 'consumer', 'otherConsumer', 'operator', 'flaggedOperator', 'deactivatedOperator', 'administrator'];

type Expected = { kind: 'pass' } | { kind: 'refuse'; status: 401 | 403; error: string; stateful: boolean };
const pass: Expected = { kind: 'pass' };
const unauthorized: Expected = { kind: 'refuse', status: 401, error: 'unauthorized', stateful: false };
const refuse403 = (error: string, stateful: boolean): Expected => ({ kind: 'refuse', status: 403, error, stateful });

/** What `caller` must get on a route with `rule`. Exhaustive: a new rule fails to compile until handled here. */
function expected(rule: AuthRule, caller: Caller): Expected {
  const consumerSide = caller === 'consumer' || caller === 'otherConsumer';
  switch (rule) {
    case 'none':
      return pass;
    case 'consumer':
      return consumerSide ? pass : unauthorized;
    case 'consumer:self':
      if (caller === 'consumer') return pass;
      return caller === 'otherConsumer' ? refuse403('forbidden', false) : unauthorized;
    case 'operator':
    case 'operator:flagged-ok':
    case 'operator:mfa-setup':
    case 'administrator': {
      if (caller === 'none' || consumerSide) return unauthorized;
      if (caller === 'deactivatedOperator') return refuse403('operator_deactivated', true);
      if (caller === 'flaggedOperator') return rule === 'operator:flagged-ok' ? pass : refuse403('password_reset_required', true);
      if (caller === 'operator') return rule === 'administrator' ? refuse403('forbidden', true) : pass;
      return pass;
    }
    case 'consumer-or-operator': {
      if (caller === 'none') return unauthorized;
      if (consumerSide) return pass;
      if (caller === 'deactivatedOperator') return refuse403('operator_deactivated', true);
      if (caller === 'flaggedOperator') return refuse403('password_reset_required', true);
      return pass;
    }
    default: {
      const never: never = rule;
      throw new Error(`unhandled rule ${String(never)}`);
    }
  }
}

const keyOf = (r: AnyRoute) => `${r.method} ${r.path}`;
const paramNames = (path: string) => [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);

/** Schema violations of a sample (or of the empty request when there is no sample). */
function sampleViolations(r: AnyRoute, sample: Sample | undefined): string[] {
  const out: string[] = [];
  const parse = (q: string | undefined) => Object.fromEntries(new URLSearchParams(q ?? ''));
  if (r.body) out.push(...check(r.body as TSchema, 'body', structuredClone(sample?.json ?? {})).map((v) => `body${v.path} ${v.message}`));
  if (r.query) out.push(...check(r.query as TSchema, 'query', parse(sample?.query)).map((v) => `query${v.path} ${v.message}`));
  if (r.multipart) {
    if (!sample?.form) return ['multipart: a sample form is needed'];
    const fields = Object.fromEntries(Object.entries(sample.form).filter(([, v]) => typeof v === 'string'));
    out.push(...check(r.multipart.fields, 'fields', fields).map((v) => `fields${v.path} ${v.message}`));
    for (const [name, spec] of Object.entries(r.multipart.files)) {
      const required = typeof spec.required === 'function' ? spec.required(fields) : spec.required;
      if (required && !(name in sample.form)) out.push(`file ${name} is required`);
    }
  }
  return out;
}

// The deployment and its principals exist before the tests are declared, so that there is one test
// per route of the table as it is now.
const h: Harness = await startHarness();
const routes = h.web.app.routes;
const consumerA = await newConsumer(h);
const consumerB = await newConsumer(h);
const tokens: Record<Caller, string | undefined> = {
  none: undefined,
  consumer: consumerA.token,
  otherConsumer: consumerB.token,
  operator: (await newOperator(h)).token,
  flaggedOperator: (await newOperator(h, { mustResetPassword: true })).token,
  deactivatedOperator: (await newOperator(h, { status: 'deactivated' })).token,
  administrator: (await newOperator(h, { role: 'administrator' })).token,
};

test.after.always(async () => {
  await h.stop();
});

test('every route of the table has the rule the document gives it, and a valid sample where one is needed', (t) => {
  const problems: string[] = [];
  for (const r of routes) {
    const key = keyOf(r);
    const rule = DOCUMENTED[key] ?? PROJECT_ROUTES[key];
    if (!rule) {
      problems.push(`${key}: not in the matrix: add it to DOCUMENTED or PROJECT_ROUTES (test/authorization-matrix.test.ts)`);
      continue;
    }
    if (r.auth !== rule) problems.push(`${key}: declared auth '${r.auth}', the document says '${rule}'`);
    const statefulRefusals = CALLERS.some((c) => {
      const e = expected(rule, c);
      return e.kind === 'refuse' && e.stateful;
    });
    if (statefulRefusals || VALID_SAMPLES[key]) {
      const violations = sampleViolations(r, VALID_SAMPLES[key]);
      if (violations.length) problems.push(`${key}: needs a valid entry in VALID_SAMPLES (${violations.join('; ')})`);
    }
  }
  const inTable = new Set(routes.map(keyOf));
  const notBuilt = Object.keys(DOCUMENTED).filter((k) => !inTable.has(k));
  if (notBuilt.length) t.log(`documented routes not built yet: ${notBuilt.join(', ')}`);
  t.deepEqual(problems, []);
  t.true(routes.length >= Object.keys(PROJECT_ROUTES).length);
});

function pathFor(r: AnyRoute): string {
  let p = r.path;
  for (const name of paramNames(r.path)) {
    const value = name === 'id' && r.auth === 'consumer:self' ? consumerA.userId : (PARAM_VALUES[name]?.() ?? randomUUID());
    p = p.replace(`{${name}}`, encodeURIComponent(value));
  }
  return p;
}

/**
 * The request a caller sends. Callers expected to pass send an unknown body key, so strict schemas stop
 * the request before any handler with side effects; stateful refusals send a valid sample.
 */
function requestFor(r: AnyRoute, e: Expected, token: string | undefined): { path: string; opts: RequestOptions } {
  const key = keyOf(r);
  const opts: RequestOptions = { token };
  let path = pathFor(r);
  if (e.kind === 'refuse' && e.stateful) {
    const sample = VALID_SAMPLES[key];
    if (sample?.json) opts.json = sample.json;
    if (sample?.form) opts.form = sample.form;
    if (sample?.query) path += `?${sample.query}`;
  } else if (r.body) {
    opts.json = { __matrix_probe__: true };
  }
  return { path, opts };
}

for (const r of routes) {
  const key = keyOf(r);
  const rule = DOCUMENTED[key] ?? PROJECT_ROUTES[key] ?? r.auth;
  test(`${key} [${rule}]`, async (t) => {
    const api = client(h.url);
    const answers: { caller: Caller; e: Expected; status: number; error: string | undefined }[] = [];
    for (const caller of CALLERS) {
      const e = expected(rule, caller);
      const { path, opts } = requestFor(r, e, tokens[caller]);
      const res = await api[r.method.toLowerCase() as 'get' | 'post' | 'patch' | 'delete'](path, opts);
      const error = typeof res.body === 'object' && res.body ? (res.body as { error?: string }).error : undefined;
      answers.push({ caller, e, status: res.status, error });
    }
    // Every failure message carries the whole row, so one run shows the route's complete picture.
    const row = answers.map((a) => `${a.caller}: ${a.status}${a.error ? ` ${a.error}` : ''}`).join(' | ');
    const fixed = ALWAYS_403.get(key);
    for (const { caller, e, status, error } of answers) {
      if (fixed) {
        t.deepEqual([status, error], [403, fixed], `${caller} must get 403 ${fixed}; row: ${row}`);
      } else if (e.kind === 'refuse') {
        t.deepEqual([status, error], [e.status, e.error], `${caller} must be refused with ${e.status} ${e.error}; row: ${row}`);
      } else {
        const stepUp = status === 403 && error !== undefined && STEP_UP.get(key) === error;
        t.false((status === 401 || status === 403) && !stepUp, `${caller} must pass authorisation, got ${status} ${error}; row: ${row}`);
      }
    }
  });
}
