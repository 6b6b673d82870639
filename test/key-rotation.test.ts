/**
 * Signing-key rotation without logging anyone out: tokens carry `kid`, the previous key still verifies
 * (JWT_PREVIOUS_PUBLIC_KEYS), and consumer one-time codes are keyed by OTP_SECRET, not by the signing
 * key, so a code sent before the rotation still signs in after it. The rotated deployment is a second
 * web process on the same database and Redis, as a rolling restart would give.
 */
import test from 'ava';
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { decodeProtectedHeader, SignJWT } from 'jose';
import { createDeps, closeDeps } from '../processes/web/deps.js';
import { keyId } from '../features/sign-in/token-service.js';
import { startWebProcess } from '../processes/web.js';
import { createLogger } from '../platform/logger.js';
import { freePort } from '../scripts/lib/private-services.js';
import { useHarness } from './helpers/harness.js';
import { client } from './helpers/http.js';

const pem = (k: ReturnType<typeof generateKeyPairSync>['privateKey']) => k.export({ type: 'pkcs8', format: 'pem' }).toString();
const oldKey = generateKeyPairSync('ed25519');
const newKey = generateKeyPairSync('ed25519');
const OTP_SECRET = 'a-deployment-otp-secret-of-at-least-32-chars';

const h = useHarness(test, { env: { JWT_PRIVATE_KEY: pem(oldKey.privateKey), OTP_SECRET, OTP_COOLDOWN_SECONDS: '0', OTP_REQUESTS_PER_IP_PER_HOUR: '100000' } });

async function webWith(env: Record<string, string>) {
  const config = h.configFor({ PORT: String(await freePort()), ...env });
  const deps = createDeps(config, { logger: createLogger({ level: 'silent' }) });
  const web = await startWebProcess(deps, { port: config.http.port, poller: false });
  return {
    url: web.web.url,
    close: async () => {
      await web.close();
      await closeDeps(deps);
    },
  };
}

const codeFor = (phone: string) => {
  const lines = readFileSync(h.outboxFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { to: string; code?: string });
  return lines.filter((l) => l.to === phone && l.code).at(-1)!.code!;
};

test('a rotation keeps old tokens and pending codes valid; unknown kids and dropped keys are refused', async (t) => {
  const phone = '+2348035550101';
  await client(h.url).post('/auth/otp/request', { json: { phone } });
  const signedIn = await client(h.url).post('/auth/otp/verify', { json: { phone, code: codeFor(phone) } });
  t.is(signedIn.status, 200, signedIn.text);
  const oldToken = signedIn.body.accessToken;
  t.is(decodeProtectedHeader(oldToken).kid, keyId(oldKey.publicKey));

  // A code sent before the rotation.
  const phone2 = '+2348035550102';
  await client(h.url).post('/auth/otp/request', { json: { phone: phone2 } });

  const rotated = await webWith({
    JWT_PRIVATE_KEY: pem(newKey.privateKey),
    JWT_PREVIOUS_PUBLIC_KEYS: oldKey.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
  });
  const dropped = await webWith({ JWT_PRIVATE_KEY: pem(newKey.privateKey) });
  try {
    const me = await client(rotated.url).get(`/users/${signedIn.body.userId}`, { token: oldToken });
    t.is(me.status, 200, 'the old key still verifies');
    const second = await client(rotated.url).post('/auth/otp/verify', { json: { phone: phone2, code: codeFor(phone2) } });
    t.is(second.status, 200, 'the pending code survives the rotation');
    t.is(decodeProtectedHeader(second.body.accessToken).kid, keyId(newKey.publicKey), 'the new key signs');
    t.is(
      (await client(h.url).get(`/users/${second.body.userId}`, { token: second.body.accessToken })).status,
      401,
      'the old deployment does not know the new key',
    );

    t.is((await client(dropped.url).get(`/users/${signedIn.body.userId}`, { token: oldToken })).status, 401, 'a key taken off the ring verifies nothing');

    // A token that names a key the ring does not hold is refused, even if signed by a ring key.
    const now = Math.floor(Date.now() / 1000);
    const forged = await new SignJWT({ sid: (await h.deps.db('sessions').first('id')).id })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid: 'not-a-known-key' })
      .setSubject(signedIn.body.userId)
      .setAudience('consumer')
      .setIssuer('faceid')
      .setIssuedAt(now)
      .setExpirationTime(now + 600)
      .sign(oldKey.privateKey);
    t.is((await client(rotated.url).get(`/users/${signedIn.body.userId}`, { token: forged })).status, 401);
  } finally {
    await rotated.close();
    await dropped.close();
  }
});
