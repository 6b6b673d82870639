/**
 * Biometric data protection (SPEC 12.4), read from the storage itself: the database's columns, the
 * Redis keys, the snapshot files. Users are enrolled through the API with real photos, the real face
 * and search workers, and the registry simulator.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { BiometricKeyRing, KeyRingError } from '../shared/crypto/key-ring.js';
import { rotateTemplates } from '../shared/crypto/rotation.js';
import { EmbeddingsRepository } from '../shared/repositories/embeddings.js';
import { PgChangeLogSource } from '../workers/search/change-log-source.js';
import { FACE_ENGINE_VERSION } from '../shared/face-models.js';
import { useHarness, ROOT } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer } from './helpers/principals.js';

const FACES = path.join(ROOT, 'test/fixtures/faces');
const photo = (f: string) => readFileSync(path.join(FACES, f));
const IMG = { bush1: photo('lfw/Bush_1.png'), bush2: photo('lfw/Bush_2.png'), powell1: photo('lfw/Powell_1.png'), powell2: photo('lfw/Powell_2.png') };

const K1 = randomBytes(32).toString('base64');
const K2 = randomBytes(32).toString('base64');

const h = useHarness(test, { face: true, search: 1, env: { BIOMETRIC_KEYS: `k1:${K1}`, BIOMETRIC_ACTIVE_KEY_ID: 'k1' } });
const api = () => client(h.url);

let seq = 0;
async function enrolPerson(image: Buffer, names: { firstName: string; lastName: string }): Promise<{ nin: string; bvn: string }> {
  const res = await api().post('/api/enroll', {
    form: {
      ...names,
      dateOfBirth: '1950-03-04',
      gender: 'male',
      phone: `+23490${String(++seq).padStart(8, '0')}`,
      photo: { data: image, filename: 'photo.png', type: 'image/png' },
    },
  });
  if (res.status !== 201) throw new Error(`enrol failed: ${res.status} ${res.text}`);
  return res.body.person;
}

/** A consumer linked to a registry person through validate → verify-face → link (the enrolment of a template). */
async function linkedConsumer(t: import('ava').ExecutionContext, registryPhoto: Buffer, selfie: Buffer, names: { firstName: string; lastName: string }) {
  const person = await enrolPerson(registryPhoto, names);
  const user = await newConsumer(h);
  const v = await api().post('/identity/nin/validate', { token: user.token, json: { nin: person.nin } });
  t.is(v.status, 200, v.text);
  const f = await api().post('/identity/nin/verify-face', { token: user.token, form: { validationToken: v.body.validationToken, file: { data: selfie, filename: 'selfie.png', type: 'image/png' } } });
  t.is(f.status, 200, f.text);
  const l = await api().post('/identity/nin/link', { token: user.token, json: { linkToken: f.body.linkToken } });
  t.is(l.status, 200, l.text);
  return { ...user, person };
}

/** Whether 512 float32 (little-endian) starting at `at` form a unit-norm vector (a template in clear). */
function unitVectorAt(buf: Buffer, at: number): boolean {
  let ss = 0;
  for (let i = 0; i < 512; i++) {
    const x = buf.readFloatLE(at + i * 4);
    if (!Number.isFinite(x) || Math.abs(x) > 1) return false;
    ss += x * x;
  }
  return Math.abs(ss - 1) < 1e-3;
}

function holdsClearTemplate(value: unknown): boolean {
  if (Buffer.isBuffer(value)) {
    for (let at = 0; at + 2048 <= value.length; at++) if (unitVectorAt(value, at)) return true;
    return false;
  }
  if (Array.isArray(value)) {
    if (value.length === 512 && value.every((x) => typeof x === 'number')) {
      const ss = value.reduce((s: number, x: number) => s + x * x, 0);
      if (Math.abs(ss - 1) < 1e-3) return true;
    }
    return value.some(holdsClearTemplate);
  }
  if (value && typeof value === 'object') return Object.values(value).some(holdsClearTemplate);
  if (typeof value === 'string' && value.length >= 2700 && /^[A-Za-z0-9+/=]+$/.test(value)) return holdsClearTemplate(Buffer.from(value, 'base64'));
  return false;
}

/** Every bytea, array, json and long text column of every table: the places a template could hide. */
async function columnsWithClearTemplates(): Promise<string[]> {
  const cols = (await h.deps.db.raw(
    `SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns
      WHERE table_schema = 'public' AND data_type IN ('bytea', 'ARRAY', 'jsonb', 'json', 'text')`,
  )).rows as { t: string; c: string }[];
  const found: string[] = [];
  for (const { t: table, c: column } of cols) {
    const rows = (await h.deps.db.raw(`SELECT "${column}" AS v FROM "${table}" WHERE "${column}" IS NOT NULL`)).rows as { v: unknown }[];
    if (rows.some((r) => holdsClearTemplate(r.v))) found.push(`${table}.${column}`);
  }
  return found;
}

test.serial('no template in clear anywhere in the database after enrolments through the API; each blob is bound to its user', async (t) => {
  const a = await linkedConsumer(t, IMG.bush1, IMG.bush2, { firstName: 'George', lastName: 'Bush' });
  const b = await linkedConsumer(t, IMG.powell1, IMG.powell2, { firstName: 'Colin', lastName: 'Powell' });
  const rows = await h.deps.db('canonicalEmbeddings').whereIn('userId', [a.userId, b.userId]);
  t.is(rows.length, 2);
  t.deepEqual([], await columnsWithClearTemplates());
  for (const r of rows) {
    t.is(r.keyId, 'k1');
    t.is(BiometricKeyRing.keyIdOf(r.embedding), 'k1');
  }
  // The scan itself finds a template in clear (the check is not blind): decrypted, the blob is one.
  const ring = BiometricKeyRing.from({ biometricKeys: `k1:${K1}`, biometricActiveKeyId: 'k1' });
  t.true(holdsClearTemplate(ring.decrypt(rows[0].embedding, rows[0].userId)));
  // A blob copied onto another user's row does not decrypt (the user id is the associated data).
  t.throws(() => ring.decrypt(rows[0].embedding, rows[1].userId), { instanceOf: KeyRingError });
});

test.serial('rotation: with both keys configured every template is re-encrypted, then a ring holding only the new key opens them all', async (t) => {
  await linkedConsumer(t, IMG.bush1, IMG.bush2, { firstName: 'George', lastName: 'Bush' });
  const both = BiometricKeyRing.from({ biometricKeys: `k1:${K1},k2:${K2}`, biometricActiveKeyId: 'k2' });
  const onlyNew = BiometricKeyRing.from({ biometricKeys: `k2:${K2}`, biometricActiveKeyId: 'k2' });
  const before = await h.deps.db('canonicalEmbeddings').select('userId', 'embedding');
  t.true(before.length >= 1);
  // Before the rotation the new-key-only ring cannot open them: the rotation has work to do.
  t.throws(() => onlyNew.decrypt(before[0].embedding, before[0].userId), { instanceOf: KeyRingError });
  const plain = new Map(before.map((r: { userId: string; embedding: Buffer }) => [r.userId, both.decrypt(r.embedding, r.userId)]));

  // Resumable in batches of one; the service keeps answering meanwhile.
  const result = await rotateTemplates(h.deps.db, both, { batchSize: 1 });
  t.is(result.rotated, before.length);
  t.deepEqual(result.remainingByKey, { k2: before.length });
  t.is((await rotateTemplates(h.deps.db, both, { batchSize: 1 })).rotated, 0);

  const after = await h.deps.db('canonicalEmbeddings').select('userId', 'embedding', 'keyId');
  for (const r of after) {
    t.is(r.keyId, 'k2');
    t.deepEqual(onlyNew.decrypt(r.embedding, r.userId), plain.get(r.userId));
  }
  // The repository and a search replica's full build read them with the new key alone.
  const repo = new EmbeddingsRepository(h.deps.db, onlyNew);
  t.is((await repo.findMany(after.map((r: { userId: string }) => r.userId))).length, after.length);
  let built = 0;
  await new PgChangeLogSource(h.deps.db, onlyNew).readAll(FACE_ENGINE_VERSION, { firstRows: 1, pageSize: 10 }, (rows) => void (built += rows.length), (rows) => void (built += rows.length));
  t.is(built, after.length);
  t.deepEqual([], await columnsWithClearTemplates());
  t.truthy(await h.deps.db('auditEvents').where({ type: 'biometric.key_rotated' }).first());
});
