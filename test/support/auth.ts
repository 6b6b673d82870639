/**
 * Sign-in flows for the account tests, through HTTP only: codes are read from the harness's SMS outbox,
 * operators are created by an administrator through POST /operators.
 */
import { readFileSync } from 'node:fs';
import { Type } from '@sinclair/typebox';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import type { Harness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';

let seq = 0;
/** A fresh Nigerian mobile number in local form (`0803…`). */
export function uniqueLocalPhone(): string {
  seq += 1;
  return `0803${String(process.pid % 100).padStart(2, '0')}${String((Date.now() + seq) % 1e5).padStart(5, '0')}`;
}
/** The E.164 form of a `0803…` number. */
export const e164 = (local: string) => `+234${local.slice(1)}`;

/** Every code the outbox holds for a phone (E.164), oldest first. */
export function outboxCodes(h: Harness, phoneE164: string): string[] {
  let text: string;
  try {
    text = readFileSync(h.outboxFile, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { to: string; code: string; sentAt: string })
    .filter((m) => m.to === phoneE164)
    .map((m) => m.code);
}

export function lastCode(h: Harness, phoneE164: string): string {
  const codes = outboxCodes(h, phoneE164);
  if (!codes.length) throw new Error(`no code in the outbox for ${phoneE164}`);
  return codes[codes.length - 1]!;
}

/** A 6-digit code that is not `code`. */
export const otherCode = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');

export interface ConsumerPair {
  accessToken: string;
  refreshToken: string;
  userId: string;
  phone: string;
}

/** OTP request + verify for a (new) phone: a real consumer session. */
export async function signInConsumer(h: Harness, phone = uniqueLocalPhone(), headers: Record<string, string> = {}): Promise<ConsumerPair> {
  const api = client(h.url);
  const req = await api.post('/auth/otp/request', { json: { phone }, headers });
  if (req.status !== 200) throw new Error(`otp/request answered ${req.status} ${req.text}`);
  const digits = phone.replace(/[^0-9+]/g, '');
  const normalised = digits.startsWith('+') ? digits : e164(digits);
  const res = await api.post('/auth/otp/verify', { json: { phone, code: lastCode(h, normalised) }, headers });
  if (res.status !== 200) throw new Error(`otp/verify answered ${res.status} ${res.text}`);
  return { accessToken: res.body.accessToken, refreshToken: res.body.refreshToken, userId: res.body.userId, phone: normalised };
}

let opSeq = 0;
export const uniqueIdentifier = (stem = 'op') => `${stem}-${process.pid}-${Date.now().toString(36)}-${++opSeq}`;

/** POST /operators by an administrator: a flagged account with its temporary password. */
export async function createOperatorAccount(
  h: Harness,
  adminToken: string,
  opts: { role?: 'operator' | 'administrator'; identifier?: string } = {},
): Promise<{ operatorId: string; identifier: string; temporaryPassword: string }> {
  const identifier = opts.identifier ?? uniqueIdentifier(opts.role === 'administrator' ? 'admin' : 'op');
  const res = await client(h.url).post('/operators', {
    token: adminToken,
    json: { identifier, displayName: 'Account Under Test', ...(opts.role ? { role: opts.role } : {}) },
  });
  if (res.status !== 201) throw new Error(`POST /operators answered ${res.status} ${res.text}`);
  return { operatorId: res.body.operator.id, identifier, temporaryPassword: res.body.temporaryPassword };
}

export interface OperatorAccount {
  operatorId: string;
  identifier: string;
  password: string;
  accessToken: string;
  refreshToken: string;
}

/** Created, signed in with the temporary password, own password set: an ordinary working account. */
export async function activeOperatorAccount(h: Harness, adminToken: string, opts: { role?: 'operator' | 'administrator' } = {}): Promise<OperatorAccount> {
  const api = client(h.url);
  const created = await createOperatorAccount(h, adminToken, opts);
  const first = await api.post('/auth/operator/login', { json: { identifier: created.identifier, password: created.temporaryPassword } });
  if (first.status !== 200) throw new Error(`login answered ${first.status} ${first.text}`);
  const password = `pw-${created.identifier}-Secret!`;
  const set = await api.post('/auth/operator/set-password', {
    token: first.body.accessToken,
    json: { currentPassword: created.temporaryPassword, newPassword: password },
  });
  if (set.status !== 200) throw new Error(`set-password answered ${set.status} ${set.text}`);
  return {
    operatorId: created.operatorId,
    identifier: created.identifier,
    password,
    accessToken: first.body.accessToken,
    refreshToken: first.body.refreshToken,
  };
}

/**
 * Routes mounted beside the real ones in the token tests: the smallest consumer and operator routes,
 * so the token rules are exercised through the real router and authorisation layer.
 */
export const probeRoutes: AnyRoute[] = [
  route({
    method: 'GET',
    path: '/_test/consumer',
    operationId: 'testConsumerProbe',
    tag: 'Test',
    summary: 'any live consumer',
    auth: 'consumer',
    responses: { 200: { description: 'who', schema: Type.Object({}) } },
    handler: async ({ auth }) => ({ body: auth }),
  }),
  route({
    method: 'GET',
    path: '/_test/operator',
    operationId: 'testOperatorProbe',
    tag: 'Test',
    summary: 'any active, unflagged operator',
    auth: 'operator',
    responses: { 200: { description: 'who', schema: Type.Object({}) } },
    handler: async ({ auth }) => ({ body: auth }),
  }),
];
