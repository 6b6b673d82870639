/**
 * The key ring's families and formats, against a real database:
 * - every sealed column of the schema belongs to a declared family (so a rotation re-seals it);
 * - the product seals with AES-GCM in one place only (platform/keys);
 * - values stored by earlier versions (TOTP secrets under MFA_ENCRYPTION_KEY, webhook secrets under a
 *   key derived from the signing key, templates under a ring key itself) are still read, and the
 *   rotation re-seals them in the one format, after which MFA_ENCRYPTION_KEY can go.
 */
import test from 'ava';
import { createCipheriv, generateKeyPairSync, hkdfSync, randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { createDeps, closeDeps } from '../processes/web/deps.js';
import { startWebProcess } from '../processes/web.js';
import { rotateKeyRing } from '../processes/key-rotation.js';
import { sealedFamilies } from '../platform/keys/sealed-families.js';
import { KeyRing } from '../platform/keys/key-ring.js';
import { openWebhookSecret, newWebhookSecret } from '../features/webhooks/secrets.js';
import { hashPassword } from '../features/sign-in/passwords.js';
import { codeAt, newTotpSecret } from '../features/sign-in/totp.js';
import { createLogger } from '../platform/logger.js';
import { freePort } from '../scripts/lib/private-services.js';
import { useHarness, ROOT } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer } from './helpers/principals.js';

const K1 = randomBytes(32).toString('base64');
const MFA_KEY = randomBytes(32).toString('base64');
const signingPem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

const h = useHarness(test, {
  env: { BIOMETRIC_KEYS: `k1:${K1}`, BIOMETRIC_ACTIVE_KEY_ID: 'k1', MFA_ENCRYPTION_KEY: MFA_KEY, JWT_PRIVATE_KEY: signingPem.replace(/\n/g, '\\n') },
});

const snake = (s: string) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

test('every sealed column of the schema belongs to a declared family', async (t) => {
  const declared = new Set(sealedFamilies().flatMap((f) => f.stores.map((s) => `${snake(s.table)}.${snake(s.column)}`)));
  const rows = (
    await h.deps.db.raw(
      `SELECT table_name, column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND (column_name LIKE '%sealed%' OR column_name LIKE 'mfa%secret' OR (table_name = 'canonical_embeddings' AND column_name = 'embedding'))`,
    )
  ).rows as { table_name: string; column_name: string }[];
  const inSchema = rows.map((r) => `${r.table_name}.${r.column_name}`).sort();
  t.true(inSchema.length >= 7, inSchema.join(', '));
  t.deepEqual(
    inSchema.filter((c) => !declared.has(c)),
    [],
    'a sealed column no family declares would stay under an old key',
  );
  t.deepEqual(
    sealedFamilies()
      .map((f) => f.name)
      .sort(),
    ['dedupe case captures', 'face templates', 'staff TOTP secrets', 'watch-list templates', 'webhook secrets'],
  );
});

test("AES-GCM is called in platform/keys only (a migration's frozen copy aside)", (t) => {
  const offenders: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(path.join(ROOT, dir))) {
      const rel = path.join(dir, name);
      if (statSync(path.join(ROOT, rel)).isDirectory()) walk(rel);
      else if (
        rel.endsWith('.ts') &&
        !rel.startsWith(path.join('platform', 'keys') + path.sep) &&
        /'aes-256-gcm'/i.test(readFileSync(path.join(ROOT, rel), 'utf8'))
      )
        offenders.push(rel);
    }
  };
  for (const dir of ['platform', 'features', 'processes', 'scripts', 'models']) walk(dir);
  t.deepEqual(offenders, []);
});

test('native code calls AES-GCM in one file only: the counterpart of the primitive for the re-rank rows of search snapshots', (t) => {
  const callers: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(path.join(ROOT, dir))) {
      const rel = path.join(dir, name);
      if (statSync(path.join(ROOT, rel)).isDirectory()) walk(rel);
      else if (
        /\.(cc|cpp|c|h)$/.test(rel) &&
        /EVP_aes_\d+_gcm|EVP_CIPHER_fetch|EVP_(Encrypt|Decrypt|Cipher)Init/.test(readFileSync(path.join(ROOT, rel), 'utf8'))
      )
        callers.push(rel);
    }
  };
  walk('native');
  t.deepEqual(callers, [path.join('native', 'search-kernel', 'src', 'sealed-rows.cc')]);
});

/** What earlier versions wrote: `v1.<iv>.<tag>.<data>`, AES-256-GCM under `key`, in `encoding`. */
function legacyText(key: Buffer, plaintext: string, encoding: 'base64' | 'base64url', associatedData?: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  if (associatedData) c.setAAD(Buffer.from(associatedData));
  const data = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
  return ['v1', iv.toString(encoding), c.getAuthTag().toString(encoding), data.toString(encoding)].join('.');
}

/** A ring blob of earlier versions: 0x01 | kid length | kid | iv | tag | data, under the ring key itself. */
function legacyRingBlob(kid: string, key: Buffer, plaintext: Buffer, subject: string): Buffer {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  c.setAAD(Buffer.from(subject));
  const data = Buffer.concat([c.update(plaintext), c.final()]);
  return Buffer.concat([Buffer.from([1, kid.length]), Buffer.from(kid), iv, c.getAuthTag(), data]);
}

test.serial('values sealed by earlier versions are read, re-sealed by the rotation, and MFA_ENCRYPTION_KEY can then go', async (t) => {
  // A staff member whose second factor an earlier version sealed under MFA_ENCRYPTION_KEY.
  const secret = newTotpSecret();
  const password = 'legacy-staff-password-long';
  const [op] = await h.deps
    .db('operators')
    .insert({
      identifier: `legacy-${Date.now()}`,
      displayName: 'Legacy',
      role: 'operator',
      status: 'active',
      mustResetPassword: false,
      passwordHash: await hashPassword(password),
      mfaSecret: legacyText(Buffer.from(MFA_KEY, 'base64'), secret, 'base64url'),
      mfaEnabledAt: new Date(),
    })
    .returning(['id', 'identifier']);
  const login = (base: string, at: number) =>
    client(base).post('/auth/operator/login', { json: { identifier: op.identifier, password, otp: codeAt(secret, at) } });
  const first = await login(h.url, Date.now() - 30_000);
  t.is(first.status, 200, first.text);

  // A webhook endpoint whose secret an earlier version sealed under a key derived from the signing key.
  const endpointId = randomUUID();
  const webhookSecret = newWebhookSecret();
  const der = (await import('node:crypto')).createPrivateKey(signingPem).export({ type: 'pkcs8', format: 'der' });
  const derived = Buffer.from(hkdfSync('sha256', der, 'faceid/derived-secret/v1', 'webhook-endpoint-secrets', 32));
  await h.deps.db('webhookEndpoints').insert({
    id: endpointId,
    url: 'https://example.com/hook',
    events: ['user.deleted'],
    secretSealed: legacyText(derived, webhookSecret, 'base64', endpointId),
  });
  t.is(openWebhookSecret(h.deps.keyRing, endpointId, (await h.deps.db('webhookEndpoints').where({ id: endpointId }).first()).secretSealed), webhookSecret);

  // A watch-list template and a face template sealed under the ring key itself (the migration marks the latter `v1:k1`).
  const template = Buffer.from(new Float32Array(512).fill(1 / Math.sqrt(512)).buffer);
  const [entry] = await h.deps
    .db('watchlistEntries')
    .insert({ reason: 'legacy', embeddingSealed: legacyRingBlob('k1', Buffer.from(K1, 'base64'), template, 'placeholder'), engineVersion: 'x' })
    .returning('id');
  await h.deps
    .db('watchlistEntries')
    .where({ id: entry.id })
    .update({ embeddingSealed: legacyRingBlob('k1', Buffer.from(K1, 'base64'), template, `watchlist:${entry.id}`) });
  const user = await newConsumer(h);
  await h.deps.db('canonicalEmbeddings').insert({
    userId: user.userId,
    embedding: legacyRingBlob('k1', Buffer.from(K1, 'base64'), template, user.userId),
    keyId: 'v1:k1',
    source: 'link_nin',
    engineVersion: 'x',
  });
  t.deepEqual(
    h.deps.keyRing.open('templates', (await h.deps.db('canonicalEmbeddings').where({ userId: user.userId }).first()).embedding, user.userId),
    template,
  );

  // The rotation under the same key re-seals what is in an older layout.
  const result = await rotateKeyRing(h.deps.db, h.deps.keyRing, { batchSize: 1 });
  const byFamily = Object.fromEntries(result.families.map((f) => [f.family, f]));
  t.is(byFamily['staff TOTP secrets']!.resealed, 1);
  t.is(byFamily['webhook secrets']!.resealed, 1);
  t.is(byFamily['watch-list templates']!.resealed, 1);
  t.is(byFamily['face templates']!.resealed, 1);
  t.deepEqual(result.keysStillInUse, []);
  const after = await h.deps.db('operators').where({ id: op.id }).first();
  t.regex(after.mfaSecret, /^k3\./);
  t.is(KeyRing.keyIdOf(after.mfaSecret), 'k1');
  t.regex((await h.deps.db('webhookEndpoints').where({ id: endpointId }).first()).secretSealed, /^k3\./);
  t.is((await h.deps.db('canonicalEmbeddings').where({ userId: user.userId }).first()).keyId, 'k1');

  // MFA_ENCRYPTION_KEY removed, and a new signing key: the second factor still signs in.
  const config = h.configFor({
    PORT: String(await freePort()),
    MFA_ENCRYPTION_KEY: '',
    JWT_PRIVATE_KEY: generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  });
  const deps = createDeps(config, { logger: createLogger({ level: 'silent' }) });
  const web = await startWebProcess(deps, { port: config.http.port, poller: false });
  try {
    const second = await login(web.web.url, Date.now());
    t.is(second.status, 200, second.text);
    t.is(openWebhookSecret(deps.keyRing, endpointId, (await h.deps.db('webhookEndpoints').where({ id: endpointId }).first()).secretSealed), webhookSecret);
  } finally {
    await web.close();
    await closeDeps(deps);
  }
});
