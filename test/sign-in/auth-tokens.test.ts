/**
 * The token lifecycle: access tokens (what is refused), refresh rotation and reuse detection, logout,
 * and the state checks made on every request (deleted user, deactivated operator). The deployment runs
 * with a signing key this file holds, so it can also forge expired tokens with the real key.
 */
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto';
import test from 'ava';
import { SignJWT, decodeJwt, decodeProtectedHeader } from 'jose';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newOperator } from '../helpers/principals.js';
import { activeOperatorAccount, probeRoutes, signInConsumer } from '../support/auth.js';

const keyPair = () => generateKeyPairSync('ed25519');
const deploymentKey = keyPair();
let admin: { operatorId: string; token: string };

const h = useHarness(
  test,
  {
    extraRoutes: probeRoutes,
    env: {
      JWT_PRIVATE_KEY: deploymentKey.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      OTP_COOLDOWN_SECONDS: '0',
      OTP_REQUESTS_PER_IP_PER_HOUR: '100000',
    },
  },
  {
    ready: async () => {
      admin = await newOperator(h, { role: 'administrator' });
    },
  },
);

const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

async function sign(key: KeyObject | Uint8Array, claims: Record<string, unknown>, opts: { alg?: string; exp?: number; iss?: string; aud?: string } = {}) {
  const jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: opts.alg ?? 'EdDSA', typ: 'JWT' })
    .setIssuedAt()
    .setIssuer(opts.iss ?? 'faceid');
  if (opts.aud) jwt.setAudience(opts.aud);
  jwt.setExpirationTime(opts.exp ?? Math.floor(Date.now() / 1000) + 600);
  return jwt.sign(key);
}

test('an access token is an EdDSA JWT with audience, subject, session id and a 900 s lifetime', async (t) => {
  const c = await signInConsumer(h);
  t.is(decodeProtectedHeader(c.accessToken).alg, 'EdDSA');
  const claims = decodeJwt(c.accessToken);
  t.is(claims.aud, 'consumer');
  t.is(claims.sub, c.userId);
  t.is(claims.iss, 'faceid');
  t.is(typeof claims.sid, 'string');
  t.is(claims.exp! - claims.iat!, 900);
  const session = await h.deps.db('sessions').where({ id: claims.sid }).first();
  t.is(session.subjectId, c.userId);
  t.is(session.subjectType, 'consumer');
  const me = await client(h.url).get('/_test/consumer', { token: c.accessToken });
  t.is(me.status, 200);
  t.is(me.body.userId, c.userId);
});

test('refresh tokens are 256-bit opaque strings stored only as SHA-256', async (t) => {
  const c = await signInConsumer(h);
  t.regex(c.refreshToken, /^[A-Za-z0-9_-]{43}$/);
  t.is(Buffer.from(c.refreshToken, 'base64url').length, 32);
  const sid = decodeJwt(c.accessToken).sid as string;
  const rows = await h.deps.db('refresh_tokens').where({ sessionId: sid });
  t.is(rows.length, 1);
  t.is(rows[0].tokenHash, createHash('sha256').update(c.refreshToken).digest('hex'));
  t.false(JSON.stringify(rows).includes(c.refreshToken));
  const ttl = (new Date(rows[0].expiresAt).getTime() - Date.now()) / 1000;
  t.true(ttl > 30 * 24 * 3600 - 60 && ttl <= 30 * 24 * 3600);
});

test('refresh rotates: a new pair in the same session, the old refresh token consumed', async (t) => {
  const api = client(h.url);
  const c = await signInConsumer(h);
  const res = await api.post('/auth/refresh', { json: { refreshToken: c.refreshToken } });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['accessToken', 'expiresIn', 'refreshExpiresIn', 'refreshToken', 'tokenType', 'userId']);
  t.is(res.body.userId, c.userId);
  t.is(res.body.tokenType, 'Bearer');
  t.not(res.body.refreshToken, c.refreshToken);
  t.is(decodeJwt(res.body.accessToken).sid, decodeJwt(c.accessToken).sid);
  t.is(res.headers.get('cache-control'), 'no-store');
  t.is((await api.get('/_test/consumer', { token: res.body.accessToken })).status, 200);
  // The next rotation works from the new token.
  const next = await api.post('/auth/refresh', { json: { refreshToken: res.body.refreshToken } });
  t.is(next.status, 200);
});

test('reusing a consumed refresh token revokes the whole family: the rotated-to token and every access token stop', async (t) => {
  const api = client(h.url);
  const c = await signInConsumer(h);
  const rotated = await api.post('/auth/refresh', { json: { refreshToken: c.refreshToken } });
  t.is(rotated.status, 200);

  const reuse = await api.post('/auth/refresh', { json: { refreshToken: c.refreshToken } });
  t.is(reuse.status, 401);
  t.is(reuse.body.error, 'invalid_refresh_token');

  const afterReuse = await api.post('/auth/refresh', { json: { refreshToken: rotated.body.refreshToken } });
  t.is(afterReuse.status, 401);
  t.is(afterReuse.body.error, 'invalid_refresh_token');
  for (const token of [rotated.body.accessToken, c.accessToken]) {
    const res = await api.get('/_test/consumer', { token });
    t.is(res.status, 401);
    t.is(res.body.error, 'unauthorized');
  }
  const audit = await h.deps.db('audit_events').where({ type: 'session.refresh_token_reused', subjectId: decodeJwt(c.accessToken).sid as string });
  t.is(audit.length, 1);
  t.is(audit[0].severity, 'high');

  // Another session of the same user is not touched.
  const other = await signInConsumer(h, c.phone);
  t.is((await api.get('/_test/consumer', { token: other.accessToken })).status, 200);
});

test('of concurrent refreshes with one token exactly one succeeds', async (t) => {
  const api = client(h.url);
  const c = await signInConsumer(h);
  const answers = await Promise.all(Array.from({ length: 6 }, () => api.post('/auth/refresh', { json: { refreshToken: c.refreshToken } })));
  t.is(answers.filter((a) => a.status === 200).length, 1);
  for (const a of answers.filter((x) => x.status !== 200)) t.is(a.body.error, 'invalid_refresh_token');
});

test('unknown, malformed or expired refresh tokens are 401 invalid_refresh_token; no bearer is needed', async (t) => {
  const api = client(h.url);
  for (const refreshToken of ['nope', 'A'.repeat(43), 'x'.repeat(512)]) {
    const res = await api.post('/auth/refresh', { json: { refreshToken } });
    t.is(res.status, 401);
    t.is(res.body.error, 'invalid_refresh_token');
  }
  for (const json of [{}, { refreshToken: '' }, { refreshToken: 'a', extra: true }]) {
    const res = await api.post('/auth/refresh', { json });
    t.is(res.status, 400);
    t.is(res.body.error, 'validation_failed');
  }
  const c = await signInConsumer(h);
  await h.deps
    .db('refresh_tokens')
    .where({ tokenHash: createHash('sha256').update(c.refreshToken).digest('hex') })
    .update({ expiresAt: new Date(Date.now() - 1000) });
  const expired = await api.post('/auth/refresh', { json: { refreshToken: c.refreshToken } });
  t.is(expired.status, 401);
  t.is(expired.body.error, 'invalid_refresh_token');
});

test('logout ends the session at once: its access token and refresh token stop working', async (t) => {
  const api = client(h.url);
  const c = await signInConsumer(h);
  const other = await signInConsumer(h, c.phone);
  t.is((await api.get('/_test/consumer', { token: c.accessToken })).status, 200);

  const out = await api.post('/auth/logout', { json: { refreshToken: c.refreshToken } });
  t.is(out.status, 204);
  t.is(out.text, '');
  const after = await api.get('/_test/consumer', { token: c.accessToken });
  t.is(after.status, 401);
  t.is(after.body.error, 'unauthorized');
  const refresh = await api.post('/auth/refresh', { json: { refreshToken: c.refreshToken } });
  t.is(refresh.status, 401);
  t.is(refresh.body.error, 'invalid_refresh_token');
  t.is((await api.post('/auth/logout', { json: { refreshToken: c.refreshToken } })).status, 204, 'idempotent');

  t.is((await api.get('/_test/consumer', { token: other.accessToken })).status, 200, 'the other session lives on');
  const unknown = await api.post('/auth/logout', { json: { refreshToken: 'not-a-token' } });
  t.is(unknown.status, 401);
  t.is(unknown.body.error, 'invalid_refresh_token');
});

test('a deleted user is refused at once: 404 with the access token, 401 on refresh', async (t) => {
  const api = client(h.url);
  const c = await signInConsumer(h);
  await h.deps.db('users').where({ id: c.userId }).update({ deletedAt: new Date() });
  const res = await api.get('/_test/consumer', { token: c.accessToken });
  t.is(res.status, 404);
  t.is(res.body.error, 'not_found');
  const refresh = await api.post('/auth/refresh', { json: { refreshToken: c.refreshToken } });
  t.is(refresh.status, 401);
  t.is(refresh.body.error, 'invalid_refresh_token');
  const session = await h.deps
    .db('sessions')
    .where({ id: decodeJwt(c.accessToken).sid as string })
    .first();
  t.truthy(session.revokedAt, 'the session is revoked');
  t.is((await api.get('/_test/consumer', { token: c.accessToken })).status, 404, 'still 404 (not 401) once revoked');
});

test('an operator deactivated while holding a valid access token is refused on the next request, and cannot refresh', async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, admin.token);
  const login = await api.post('/auth/operator/login', { json: { identifier: op.identifier, password: op.password } });
  t.is(login.status, 200);
  t.is((await api.get('/_test/operator', { token: login.body.accessToken })).status, 200);

  t.is((await api.delete(`/operators/${op.operatorId}`, { token: admin.token })).status, 200);
  const res = await api.get('/_test/operator', { token: login.body.accessToken });
  t.is(res.status, 403);
  t.is(res.body.error, 'operator_deactivated');
  const refresh = await api.post('/auth/refresh', { json: { refreshToken: login.body.refreshToken } });
  t.is(refresh.status, 403);
  t.is(refresh.body.error, 'operator_deactivated');
});

test('an operator refresh returns operatorId and mustResetPassword', async (t) => {
  const api = client(h.url);
  const op = await activeOperatorAccount(h, admin.token);
  const login = await api.post('/auth/operator/login', { json: { identifier: op.identifier, password: op.password } });
  const res = await api.post('/auth/refresh', { json: { refreshToken: login.body.refreshToken } });
  t.is(res.status, 200);
  t.is(res.body.operatorId, op.operatorId);
  t.is(res.body.mustResetPassword, false);
  t.is(res.body.userId, undefined);
  t.is(decodeJwt(res.body.accessToken).aud, 'operator');
});

test('forged, foreign and expired tokens are 401 unauthorized', async (t) => {
  const api = client(h.url);
  const c = await signInConsumer(h);
  const op = await activeOperatorAccount(h, admin.token);
  const opLogin = await api.post('/auth/operator/login', { json: { identifier: op.identifier, password: op.password } });
  const consumerClaims = { sub: c.userId, sid: decodeJwt(c.accessToken).sid };
  const operatorClaims = { sub: op.operatorId, sid: decodeJwt(opLogin.body.accessToken).sid };
  const now = Math.floor(Date.now() / 1000);

  // Sanity: the real key signs tokens this deployment accepts, so the refusals below are about one thing each.
  t.is((await api.get('/_test/consumer', { token: await sign(deploymentKey.privateKey, consumerClaims, { aud: 'consumer' }) })).status, 200);
  t.is((await api.get('/_test/operator', { token: await sign(deploymentKey.privateKey, operatorClaims, { aud: 'operator' }) })).status, 200);

  const cases: [string, string, string][] = [
    [
      'alg none',
      '/_test/consumer',
      `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ ...consumerClaims, aud: 'consumer', iss: 'faceid', iat: now, exp: now + 600 })}.`,
    ],
    [
      'alg none (operator)',
      '/_test/operator',
      `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ ...operatorClaims, aud: 'operator', iss: 'faceid', iat: now, exp: now + 600 })}.`,
    ],
    ['another Ed25519 key', '/_test/consumer', await sign(keyPair().privateKey, consumerClaims, { aud: 'consumer' })],
    ['another Ed25519 key (operator)', '/_test/operator', await sign(keyPair().privateKey, operatorClaims, { aud: 'operator' })],
    [
      'HS256 keyed with the public key',
      '/_test/consumer',
      await sign(new TextEncoder().encode(String(deploymentKey.publicKey.export({ type: 'spki', format: 'pem' }))), consumerClaims, {
        alg: 'HS256',
        aud: 'consumer',
      }),
    ],
    ['expired exp', '/_test/consumer', await sign(deploymentKey.privateKey, consumerClaims, { aud: 'consumer', exp: now - 120 })],
    ['expired exp (operator)', '/_test/operator', await sign(deploymentKey.privateKey, operatorClaims, { aud: 'operator', exp: now - 120 })],
    ['consumer token on an operator route', '/_test/operator', c.accessToken],
    ['consumer token on an administrator route', '/operators/00000000-0000-4000-8000-000000000000/sessions', c.accessToken],
    ['operator token on a consumer route', '/_test/consumer', opLogin.body.accessToken],
    ['admin token on a consumer route', '/_test/consumer', admin.token],
    ['consumer claims with the operator audience', '/_test/operator', await sign(deploymentKey.privateKey, consumerClaims, { aud: 'operator' })],
    ['no audience', '/_test/consumer', await sign(deploymentKey.privateKey, consumerClaims)],
    ['wrong issuer', '/_test/consumer', await sign(deploymentKey.privateKey, consumerClaims, { aud: 'consumer', iss: 'someone-else' })],
    ['no session id', '/_test/consumer', await sign(deploymentKey.privateKey, { sub: c.userId }, { aud: 'consumer' })],
    [
      'a session that does not exist',
      '/_test/consumer',
      await sign(deploymentKey.privateKey, { sub: c.userId, sid: '00000000-0000-4000-8000-000000000000' }, { aud: 'consumer' }),
    ],
    ["another subject's session", '/_test/consumer', await sign(deploymentKey.privateKey, { sub: c.userId, sid: operatorClaims.sid }, { aud: 'consumer' })],
    [
      'tampered payload',
      '/_test/consumer',
      (() => {
        const [hd, , sg] = c.accessToken.split('.');
        return `${hd}.${b64({ ...decodeJwt(c.accessToken), sub: op.operatorId })}.${sg}`;
      })(),
    ],
    ['garbage', '/_test/consumer', 'not.a.jwt'],
  ];
  for (const [name, path, token] of cases) {
    const res = await api.get(path, { token });
    t.is(res.status, 401, name);
    t.is(res.body.error, 'unauthorized', name);
  }
  for (const authorization of ['', `Token ${c.accessToken}`, 'Bearer', `Basic ${Buffer.from('a:b').toString('base64')}`]) {
    const res = await api.get('/_test/consumer', { headers: { authorization } });
    t.is(res.status, 401, authorization);
    t.is(res.body.error, 'unauthorized');
  }
});

test('housekeeping deletes refresh tokens expired beyond the grace period, and keeps the rest', async (t) => {
  const { pruneExpiredRefreshTokens } = await import('../../features/sign-in/session-service.js');
  const db = h.deps.db;
  const [user] = await db('users')
    .insert({ phone: `+23480399${String(Date.now()).slice(-5)}` })
    .returning('id');
  const [session] = await db('sessions').insert({ subjectType: 'consumer', subjectId: user.id }).returning('id');
  const day = 24 * 3600_000;
  await db('refreshTokens').insert([
    { sessionId: session.id, tokenHash: `old-${session.id}`, expiresAt: new Date(Date.now() - 40 * day) },
    { sessionId: session.id, tokenHash: `recent-${session.id}`, expiresAt: new Date(Date.now() - 5 * day) },
    { sessionId: session.id, tokenHash: `live-${session.id}`, expiresAt: new Date(Date.now() + 5 * day) },
  ]);
  t.true((await pruneExpiredRefreshTokens(db)) >= 1);
  const left = (await db('refreshTokens').where({ sessionId: session.id }).select('tokenHash'))
    .map((r: { tokenHash: string }) => r.tokenHash.split('-')[0])
    .sort();
  t.deepEqual(left, ['live', 'recent']);
});
