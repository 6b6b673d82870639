/**
 * The one key ring, end to end over HTTP with the real face and search workers:
 * - a rotation (`npm run rotate-biometric-key`, run as an operator runs it) re-seals every sealed family
 *   (face templates, watch-list templates, dedupe case captures, staff TOTP secrets, webhook secrets)
 *   and reports each; a deployment that then drops the old key links identities, shows a case's
 *   capture, signs staff in with their second factor and signs webhook deliveries;
 * - TOTP and webhook secrets come from the ring, not from the signing key: the same PEM written with
 *   real newlines, or a rotated signing key, changes nothing for them.
 *
 * Photos (test/fixtures/faces, PROVENANCE.md): LFW tiles of George W. Bush, Colin Powell, Hugo Chávez.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Webhook } from 'standardwebhooks';
import { createDeps, closeDeps, type AppDeps } from '../processes/web/deps.js';
import { startWebProcess, type RunningWebProcess } from '../processes/web.js';
import { createLogger } from '../platform/logger.js';
import { codeAt } from '../features/sign-in/totp.js';
import { hashPassword } from '../features/sign-in/passwords.js';
import { freePort } from '../scripts/lib/private-services.js';
import { useHarness, ROOT, type Harness } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer, newOperator } from './helpers/principals.js';
import { startWebhookReceiver, type WebhookReceiver } from './helpers/webhook-receiver.js';
import { recordUserDeleted } from './helpers/events.js';

const run = promisify(execFile);
const photo = (f: string) => readFileSync(path.join(ROOT, 'test/fixtures/faces', f));
const IMG = {
  bush1: photo('lfw/Bush_1.png'),
  bush2: photo('lfw/Bush_2.png'),
  bush3: photo('lfw/Bush_3.png'),
  powell1: photo('lfw/Powell_1.png'),
  powell2: photo('lfw/Powell_2.png'),
  chavez: photo('lfw/Chavez_1.png'),
};

const K1 = randomBytes(32).toString('base64');
const K2 = randomBytes(32).toString('base64');
const signingKey = generateKeyPairSync('ed25519');
const nextSigningKey = generateKeyPairSync('ed25519');
const pem = (k: ReturnType<typeof generateKeyPairSync>['privateKey']) => k.export({ type: 'pkcs8', format: 'pem' }).toString();
/** The PEM as most deployments write it in an environment file: one line, `\n` escaped. */
const ESCAPED_PEM = pem(signingKey.privateKey).replace(/\n/g, '\\n');
const OLD_PUBLIC_PEM = signingKey.publicKey.export({ type: 'spki', format: 'pem' }).toString();

interface ExtraWeb {
  url: string;
  deps: AppDeps;
  web: RunningWebProcess;
}
const extras: ExtraWeb[] = [];
let receiver: WebhookReceiver;

const h = useHarness(
  test,
  {
    face: true,
    search: 1,
    // The workers hold both keys throughout; the web processes below show what a ring without k1 reads.
    env: {
      BIOMETRIC_KEYS: `k1:${K1},k2:${K2}`,
      BIOMETRIC_ACTIVE_KEY_ID: 'k1',
      JWT_PRIVATE_KEY: ESCAPED_PEM,
      // Deliveries go only through the web processes started below (with their own keys).
      UPSTREAM_WORKER_IN_WEB: 'false',
    },
  },
  {
    ready: async () => {
      receiver = await startWebhookReceiver();
    },
    beforeStop: async () => {
      for (const e of extras) {
        await e.web.close();
        await closeDeps(e.deps);
      }
      await receiver.close();
    },
  },
);

async function extraWeb(hh: Harness, env: Record<string, string>, opts: { production?: boolean } = {}): Promise<ExtraWeb> {
  const loaded = hh.configFor({ PORT: String(await freePort()), WEBHOOK_DISPATCH_INTERVAL_MS: '100', ...env });
  // `production`: what production decides in the code (TOTP secrets used to be keyed from the signing key
  // there), without the production refusals a test deployment cannot meet (a Redis password, a real registry).
  const config = opts.production ? { ...loaded, isProduction: true } : loaded;
  const deps = createDeps(config, { logger: createLogger({ level: 'silent' }) });
  const web = await startWebProcess(deps, { port: config.http.port, poller: false });
  const extra = { url: web.web.url, deps, web };
  extras.push(extra);
  return extra;
}

let seq = 0;
async function enrol(image: Buffer, firstName: string, lastName: string): Promise<{ nin: string; bvn: string }> {
  const res = await client(h.url).post('/api/enroll', {
    form: {
      firstName,
      lastName,
      dateOfBirth: `19${40 + (++seq % 50)}-03-04`,
      gender: 'male',
      phone: `+23482${String(seq).padStart(8, '0')}`,
      photo: { data: image, filename: 'photo.png', type: 'image/png' },
    },
  });
  if (res.status !== 201) throw new Error(`enrol failed: ${res.status} ${res.text}`);
  return res.body.person;
}

/** validate → verify-face (a selfie, or the NIN capture reused) → link; the link's answer. */
async function linkWith(base: string, token: string, registry: 'nin' | 'bvn', number: string, selfie: Buffer | null) {
  const v = await client(base).post(`/identity/${registry}/validate`, { token, json: { [registry]: number } });
  if (v.status !== 200) throw new Error(`validate: ${v.status} ${v.text}`);
  const f = await client(base).post(`/identity/${registry}/verify-face`, {
    token,
    form: {
      validationToken: v.body.validationToken,
      ...(selfie ? { file: { data: selfie, filename: 'selfie.png', type: 'image/png' } } : { reuseCapture: 'true' }),
    },
  });
  if (f.status !== 200) throw new Error(`verify-face: ${f.status} ${f.text}`);
  return client(base).post(`/identity/${registry}/link`, { token, json: { linkToken: f.body.linkToken } });
}

/** A staff member who signs in with a password, and enables a second factor through `base`. */
async function staffWithMfa(base: string): Promise<{ identifier: string; password: string; secret: string }> {
  const password = `staff-pass-${++seq}-long-enough`;
  const identifier = `keys-staff-${Date.now()}-${seq}`;
  await h.deps.db('operators').insert({
    identifier,
    displayName: 'Staff',
    role: 'operator',
    status: 'active',
    mustResetPassword: false,
    passwordHash: await hashPassword(password),
  });
  const signIn = await client(base).post('/auth/operator/login', { json: { identifier, password } });
  if (signIn.status !== 200) throw new Error(`login: ${signIn.status} ${signIn.text}`);
  const setup = await client(base).post('/auth/operator/mfa/setup', { token: signIn.body.accessToken, json: { password } });
  if (setup.status !== 200) throw new Error(`setup: ${setup.status} ${setup.text}`);
  const confirm = await client(base).post('/auth/operator/mfa/confirm', {
    token: signIn.body.accessToken,
    json: { code: codeAt(setup.body.secret), password },
  });
  if (confirm.status !== 200) throw new Error(`confirm: ${confirm.status} ${confirm.text}`);
  return { identifier, password, secret: setup.body.secret };
}

/** Signs in with the next step's code (the confirmation used the current one: a code is accepted once). */
const signInWithSecondFactor = (base: string, s: { identifier: string; password: string; secret: string }) =>
  client(base).post('/auth/operator/login', { json: { identifier: s.identifier, password: s.password, otp: codeAt(s.secret, Date.now() + 30_000) } });

/** A `user.deleted` event and the delivery `path` receives, checked against the endpoint's secret. */
async function deliveredAndVerified(t: import('ava').ExecutionContext, receivedPath: string, secret: string): Promise<void> {
  const eventId = await recordUserDeleted(h.deps.db, randomUUID());
  const [w] = await receiver.waitFor(receivedPath, 1, 20_000);
  t.is(w!.headers['webhook-id'], eventId);
  t.is((new Webhook(secret).verify(w!.body, w!.headers) as { type: string }).type, 'user.deleted');
}

test.serial('staff TOTP secrets do not depend on the signing key: the same PEM with real newlines, or a rotated key, still signs staff in', async (t) => {
  const escaped = await extraWeb(h, { JWT_PRIVATE_KEY: ESCAPED_PEM }, { production: true });
  const alice = await staffWithMfa(escaped.url);
  const bob = await staffWithMfa(escaped.url);

  // The same key, written with real newlines (a secrets manager, a mounted file).
  const newlines = await extraWeb(h, { JWT_PRIVATE_KEY: pem(signingKey.privateKey) }, { production: true });
  const a = await signInWithSecondFactor(newlines.url, alice);
  t.is(a.status, 200, a.text);
  t.is(typeof a.body.accessToken, 'string');

  // The signing key rotated (the old one still verifies): the second factor is unchanged.
  const rotated = await extraWeb(h, { JWT_PRIVATE_KEY: pem(nextSigningKey.privateKey), JWT_PREVIOUS_PUBLIC_KEYS: OLD_PUBLIC_PEM }, { production: true });
  const b = await signInWithSecondFactor(rotated.url, bob);
  t.is(b.status, 200, b.text);
});

test.serial('webhook secrets do not depend on the signing key: deliveries after a signing-key rotation are signed with the endpoint secret', async (t) => {
  const admin = await newOperator(h, { role: 'administrator' });
  const created = await client(h.url).post('/webhooks/endpoints', {
    token: admin.token,
    json: { url: `${receiver.url}/after-jwt-rotation`, events: ['user.deleted'] },
  });
  t.is(created.status, 201, created.text);
  await extraWeb(h, { JWT_PRIVATE_KEY: pem(nextSigningKey.privateKey), JWT_PREVIOUS_PUBLIC_KEYS: OLD_PUBLIC_PEM, UPSTREAM_WORKER_IN_WEB: 'true' });
  await deliveredAndVerified(t, '/after-jwt-rotation', created.body.secret);
  await h.deps.db('webhookEndpoints').where({ id: created.body.endpoint.id }).del();
});

test.serial(
  'a rotation re-seals every sealed family and reports each; with the old key dropped, links, case captures, sign-ins and deliveries work',
  async (t) => {
    const admin = await newOperator(h, { role: 'administrator' });
    // Face templates: a linked consumer.
    const powell = await enrol(IMG.powell1, 'Colin', 'Powell');
    const powellUser = await newConsumer(h);
    t.is((await linkWith(h.url, powellUser.token, 'nin', powell.nin, IMG.powell2)).status, 200);
    // A watch-list template: every link is screened against it.
    const listed = await client(h.url).post('/watchlist', {
      token: admin.token,
      form: { reason: 'key rotation test', file: { data: IMG.chavez, filename: 'face.png', type: 'image/png' } },
    });
    t.is(listed.status, 201, listed.text);
    // A dedupe case with its sealed capture: one human under two identities.
    const bush = await enrol(IMG.bush1, 'George', 'Bush');
    const bushUser = await newConsumer(h);
    t.is((await linkWith(h.url, bushUser.token, 'nin', bush.nin, IMG.bush2)).status, 200);
    const other = await enrol(IMG.bush3, 'Walker', 'Bush');
    const second = await newConsumer(h);
    t.is((await linkWith(h.url, second.token, 'nin', other.nin, IMG.bush2)).status, 200);
    const theCase = await h.deps.db('dedupeCases').where({ userId: second.userId }).whereNotNull('captureSealed').first();
    t.truthy(theCase, 'the duplicate opened a case with its capture');
    // A staff TOTP secret and a webhook secret.
    const carol = await staffWithMfa(h.url);
    const endpoint = await client(h.url).post('/webhooks/endpoints', {
      token: admin.token,
      json: { url: `${receiver.url}/after-key-rotation`, events: ['user.deleted'] },
    });
    t.is(endpoint.status, 201, endpoint.text);

    // The rotation, as an operator runs it: both keys in the ring, the new one active.
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'scripts/rotate-biometric-key.ts', '--batch', '2'], {
      cwd: ROOT,
      env: { ...process.env, ...h.env, BIOMETRIC_KEYS: `k1:${K1},k2:${K2}`, BIOMETRIC_ACTIVE_KEY_ID: 'k2' },
    });
    const reported = (family: string) => Number(new RegExp(`${family}: (\\d+) re-sealed`).exec(stdout)?.[1] ?? NaN);
    t.is(reported('face templates'), Number((await h.deps.db('canonicalEmbeddings').count({ n: '*' }).first())!.n), stdout);
    t.is(reported('watch-list templates'), 1, stdout);
    t.is(reported('dedupe case captures'), 1, stdout);
    // Every staff second factor of the deployment (this file's earlier tests enabled some too).
    const totp = (await h.deps.db('operators').select('mfaSecret', 'mfaPendingSecret')).flatMap((r: Record<string, string | null>) =>
      [r.mfaSecret, r.mfaPendingSecret].filter(Boolean),
    );
    t.true(totp.length >= 1);
    t.is(reported('staff TOTP secrets'), totp.length, stdout);
    t.is(reported('webhook secrets'), 1, stdout);
    t.regex(stdout, /every sealed value is under k2/);
    const audit = await h.deps.db('auditEvents').where({ type: 'biometric.key_rotated' }).orderBy('createdAt', 'desc').first();
    t.like(audit.data, { activeKeyId: 'k2', families: { 'watch-list templates': { resealed: 1, byKey: { k2: 1 } } } });

    // The old key dropped everywhere, as the docs say: the workers restart with the new key alone, and
    // a web process has a new signing key too (the old one still verifies tokens).
    const onlyNewKey = { BIOMETRIC_KEYS: `k2:${K2}`, BIOMETRIC_ACTIVE_KEY_ID: 'k2' };
    for (const w of [...h.faceWorkers.splice(0), ...h.searchWorkers.splice(0)]) await w.close();
    await h.startFaceWorker(onlyNewKey);
    await h.startSearchWorker(onlyNewKey);
    const dropped = await extraWeb(h, {
      BIOMETRIC_KEYS: `k2:${K2}`,
      BIOMETRIC_ACTIVE_KEY_ID: 'k2',
      JWT_PRIVATE_KEY: pem(nextSigningKey.privateKey),
      JWT_PREVIOUS_PUBLIC_KEYS: OLD_PUBLIC_PEM,
      UPSTREAM_WORKER_IN_WEB: 'true',
    });
    // The reusable capture sealed in Redis under k1 minutes ago no longer opens: the consumer is asked
    // for a selfie (404 as outside the reuse window), not given a 500.
    const v = await client(dropped.url).post('/identity/bvn/validate', { token: powellUser.token, json: { bvn: powell.bvn } });
    t.is(v.status, 200, v.text);
    const reuse = await client(dropped.url).post('/identity/bvn/verify-face', {
      token: powellUser.token,
      form: { validationToken: v.body.validationToken, reuseCapture: 'true' },
    });
    t.is(reuse.status, 404, reuse.text);
    // The BVN link: screened against the watch-list, checked against the NIN's canonical template.
    const bvn = await linkWith(dropped.url, powellUser.token, 'bvn', powell.bvn, IMG.powell2);
    t.is(bvn.status, 200, bvn.text);
    // The case's capture, as the administrator reviews it.
    const capture = await fetch(`${dropped.url}/dedupe/cases/${theCase.id}/capture`, { headers: { authorization: `Bearer ${admin.token}` } });
    t.is(capture.status, 200);
    t.true(
      Buffer.from(await capture.arrayBuffer())
        .subarray(0, 3)
        .equals(Buffer.from([0xff, 0xd8, 0xff])),
      'the capture is a JPEG',
    );
    const signedIn = await signInWithSecondFactor(dropped.url, carol);
    t.is(signedIn.status, 200, signedIn.text);
    await deliveredAndVerified(t, '/after-key-rotation', endpoint.body.secret);
  },
);
