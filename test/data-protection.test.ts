/**
 * Biometric data protection (SPEC 12.4), read from the storage itself: the database's columns, the
 * Redis keys, the snapshot files. Users are enrolled through the API with real photos, the real face
 * and search workers, and the registry simulator.
 */
import test from 'ava';
import { Queue } from 'bullmq';
import { bullPrefix } from '../platform/jobs/contract.js';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { KeyRing, KeyRingError } from '../platform/keys/key-ring.js';
import { rotateKeyRing } from '../processes/key-rotation.js';
import { EmbeddingsRepository } from '../features/face/embeddings-repository.js';
import { PgChangeLogSource } from '../features/search/worker/change-log-source.js';
import { SnapshotStore, type SnapshotMeta } from '../features/search/worker/snapshot-store.js';
import { snapshotUserIds, VECTORS_FILE } from '../features/search/worker/sketch-engine.js';
import { openRowFor } from '../features/search/worker/sealed-rows-file.js';
import { FACE_ENGINE_VERSION } from '../platform/face/face-models.js';
import { useHarness, ROOT } from './helpers/harness.js';
import { client } from './helpers/http.js';
import { newConsumer } from './helpers/principals.js';
import { issueProofToken } from '../features/verification/proof-tokens.js';

const FACES = path.join(ROOT, 'test/fixtures/faces');
const photo = (f: string) => readFileSync(path.join(FACES, f));
const IMG = { bush1: photo('lfw/Bush_1.png'), bush2: photo('lfw/Bush_2.png'), powell1: photo('lfw/Powell_1.png'), powell2: photo('lfw/Powell_2.png') };

const K1 = randomBytes(32).toString('base64');
const K2 = randomBytes(32).toString('base64');

// As a deployment runs: every process a login member of the least-privilege role `faceid_app`, and the
// retention sweep scheduled (every second here).
const h = useHarness(test, {
  face: true,
  search: 1,
  appRole: true,
  retentionSweep: true,
  env: { BIOMETRIC_KEYS: `k1:${K1}`, BIOMETRIC_ACTIVE_KEY_ID: 'k1', ERASURE_MAX_SECONDS: '3', RETENTION_SWEEP_INTERVAL_SECONDS: '1' },
});

/** Files of that name in every snapshot of the search worker's directory. */
function snapshotFiles(name: string): string[] {
  const dir = h.config.search.snapshotDir;
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((d) => d.startsWith('snap-'))
    .map((d) => path.join(dir, d, name))
    .filter((f) => existsSync(f));
}
const api = () => client(h.url);

/**
 * For every snapshot on disk: how many rows of its sealed re-rank file open for `userId` (trying every
 * position), and whether the row of the first user it lists opens at that user's position.
 */
async function snapshotRowChecks(userId: string): Promise<{ opensForErased: number; listedOpens: boolean }[]> {
  const dir = h.config.search.snapshotDir;
  const ring = KeyRing.from({ biometricKeys: `k1:${K1}`, biometricActiveKeyId: 'k1' });
  const store = new SnapshotStore(dir, ring);
  const out: { opensForErased: number; listedOpens: boolean }[] = [];
  for (const meta of snapshotFiles('meta.json')) {
    const m = JSON.parse(readFileSync(meta, 'utf8')) as SnapshotMeta;
    const reader = store.reader({ dir: path.dirname(meta), meta: m });
    const ids = await snapshotUserIds(reader);
    if (ids.length === 0) continue;
    const { file, access } = reader.rowsFile(VECTORS_FILE, 512);
    let opensForErased = 0;
    for (let row = 0; row < ids.length; row++) if (openRowFor(file, access, 512, row, userId)) opensForErased++;
    out.push({ opensForErased, listedOpens: openRowFor(file, access, 512, 0, ids[0]!) !== null });
  }
  return out;
}

/** The user ids each snapshot on disk lists, decrypted with the test's key ring (a snapshot retired meanwhile is skipped). */
async function snapshotIdLists(): Promise<string[][]> {
  const dir = h.config.search.snapshotDir;
  const store = new SnapshotStore(dir, KeyRing.from({ biometricKeys: `k1:${K1}`, biometricActiveKeyId: 'k1' }));
  const out: string[][] = [];
  for (const meta of snapshotFiles('meta.json')) {
    try {
      const m = JSON.parse(readFileSync(meta, 'utf8')) as SnapshotMeta;
      out.push(await snapshotUserIds(store.reader({ dir: path.dirname(meta), meta: m })));
    } catch (e) {
      if (existsSync(meta)) throw e;
    }
  }
  return out;
}

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
  const f = await api().post('/identity/nin/verify-face', {
    token: user.token,
    form: { validationToken: v.body.validationToken, file: { data: selfie, filename: 'selfie.png', type: 'image/png' } },
  });
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
  const cols = (
    await h.deps.db.raw(
      `SELECT table_name::text AS t, column_name::text AS c FROM information_schema.columns
      WHERE table_schema = 'public' AND data_type IN ('bytea', 'ARRAY', 'jsonb', 'json', 'text')`,
    )
  ).rows as { t: string; c: string }[];
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
    t.is(KeyRing.keyIdOf(r.embedding), 'k1');
  }
  // The scan itself finds a template in clear (the check is not blind): decrypted, the blob is one.
  const ring = KeyRing.from({ biometricKeys: `k1:${K1}`, biometricActiveKeyId: 'k1' });
  t.true(holdsClearTemplate(ring.open('templates', rows[0].embedding, rows[0].userId)));
  // A blob copied onto another user's row does not decrypt (the user id is the associated data).
  t.throws(() => ring.open('templates', rows[0].embedding, rows[1].userId), { instanceOf: KeyRingError });
});

/** Every row of every table as text (what a database dump holds), except the simulated national registry's. */
async function databaseDump(): Promise<string> {
  const tables = (
    await h.deps.db.raw("SELECT table_name::text AS t FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")
  ).rows as { t: string }[];
  const out: string[] = [];
  // registry_persons is the registry simulator's store (the national registry's data, not the service's).
  for (const { t: table } of tables.filter((x) => x.t !== 'registry_persons')) {
    const rows = (await h.deps.db.raw(`SELECT row_to_json(x)::text AS j FROM "${table}" x`)).rows as { j: string }[];
    out.push(...rows.map((r) => `${table}: ${r.j}`));
  }
  return out.join('\n');
}

async function redisKeys(): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, found] = await h.deps.redis.scan(cursor, 'MATCH', `${h.config.redis.prefix}:*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...found);
  } while (cursor !== '0');
  return keys;
}

test.serial(
  "erasure: DELETE leaves no phone, name, number or bank account in the database, purges Redis (the phone's sign-in code and cooldown, the biometric failure count) and the snapshots, then audits user.erased; the number can be linked again and is recognised",
  async (t) => {
    const user = await linkedConsumer(t, IMG.bush1, IMG.bush2, { firstName: 'Erasable', lastName: 'Person' });
    const { phone } = await h.deps.db('users').where({ id: user.userId }).first('phone');
    await h.deps.db('users').where({ id: user.userId }).update({ bankAccount: '0123456789' });
    // Redis copies: a pending BVN validation (registry photo) and the reusable NIN capture.
    const v = await api().post('/identity/bvn/validate', { token: user.token, json: { bvn: user.person.bvn } });
    t.is(v.status, 200, v.text);
    const before = (await redisKeys()).filter((k) => k.includes(user.userId));
    t.true(
      before.some((k) => k.includes(':identity:capture:')),
      before.join(','),
    );
    t.true(
      before.some((k) => k.includes(':identity:current-validation:')),
      before.join(','),
    );
    const dumpBefore = await databaseDump();
    for (const value of [phone, 'Erasable', user.person.nin, '0123456789']) t.true(dumpBefore.includes(value), `the dump holds ${value} before`);
    const validationKeys = (await redisKeys()).filter((k) => k.includes(':identity:validation:'));
    // The phone's sign-in state: a pending code, its cooldown and the day's counter (keys named by an
    // HMAC of the phone, so found as the keys this request added).
    const otpBefore = new Set((await redisKeys()).filter((k) => k.includes(':otp:')));
    const otp = await api().post('/auth/otp/request', { json: { phone } });
    t.is(otp.status, 200, otp.text);
    const phoneKeys = (await redisKeys()).filter((k) => k.includes(':otp:') && !otpBefore.has(k) && !k.includes(':otp:ip:'));
    t.deepEqual(phoneKeys.map((k) => k.split(':otp:')[1]!.split(':')[0]).sort(), ['code', 'cooldown', 'daily'], phoneKeys.join(','));
    // A failed comparison: the user's biometric failure count.
    const miss = await api().post('/verify/self', { token: user.token, form: { image: { data: IMG.powell1, filename: 'other.png', type: 'image/png' } } });
    t.is(miss.status, 200, miss.text);
    t.is(miss.body.outcome, 'no_match');
    t.true((await redisKeys()).some((k) => k.includes(`:biometric:attempts:${user.userId}`)));

    const { proofToken } = await issueProofToken(h.deps, user.userId, user.sessionId);
    const del = await api().delete(`/users/${user.userId}`, { token: user.token, json: { proofToken } });
    t.is(del.status, 200, del.text);
    t.is(del.body.status, 'deleted');

    const dump = await databaseDump();
    for (const value of [phone, phone.slice(1), 'Erasable', user.person.nin, user.person.bvn, '0123456789'])
      t.false(dump.includes(value), `the dump still holds ${value}`);
    const links = await h.deps.db('ninLinks').where({ userId: user.userId });
    t.is(links.length, 1);
    t.is(links[0].nin, null);
    t.is(links[0].registryRecord, null);
    t.regex(links[0].numberHash, /^[0-9a-f]{64}$/);
    t.deepEqual(
      (await redisKeys()).filter((k) => k.includes(user.userId) || validationKeys.includes(k)),
      [],
    );
    // The phone's pending code and cooldown are gone; its daily counter (a count under an HMAC,
    // expiring within 24 h) is kept as the abuse cap it is (docs/data-protection.md).
    const left = new Set(await redisKeys());
    t.deepEqual(
      phoneKeys.filter((k) => left.has(k)).map((k) => k.split(':otp:')[1]!.split(':')[0]),
      ['daily'],
    );

    // The receipt once the snapshots on disk are rewritten (ERASURE_MAX_SECONDS is 3 here).
    const t0 = Date.now();
    let receipt;
    while (!(receipt = await h.deps.db('auditEvents').where({ type: 'user.erased', subjectId: user.userId }).first()) && Date.now() - t0 < 10_000)
      await new Promise((r) => setTimeout(r, 200));
    t.truthy(receipt, 'user.erased within the erasure deadline');
    t.deepEqual(receipt.data.steps, ['postgresql', 'redis', 'search_snapshots']);
    const snapshotIds = await snapshotIdLists();
    t.true(snapshotIds.length >= 1, 'the search worker writes snapshots');
    t.false(
      snapshotIds.some((ids) => ids.includes(user.userId)),
      'no snapshot on disk lists the erased user',
    );
    // Nor holds a re-rank row that opens for them (at any position), while a listed user's row opens at theirs.
    const rows = await snapshotRowChecks(user.userId);
    t.true(rows.length >= 1);
    for (const r of rows) {
      t.is(r.opensForErased, 0, 'no row of the rewritten snapshot opens for the erased user');
      t.true(r.listedOpens, "a listed user's row opens at its position (the check can see a row)");
    }
    t.is((await h.deps.db('auditEvents').where({ type: 'user.erased', subjectId: user.userId })).length, 1);
    t.truthy(await h.deps.db('webhookEvents').where({ type: 'user.deleted' }).whereRaw("data->>'userId' = ?", [user.userId]).first());

    // The released number: another account links it; the erased row is recognised by its hash and released.
    const other = await newConsumer(h);
    const v2 = await api().post('/identity/nin/validate', { token: other.token, json: { nin: user.person.nin } });
    t.is(v2.status, 200, v2.text);
    t.truthy(v2.body.validationToken, 'not reported as linked to a live account');
    const f2 = await api().post('/identity/nin/verify-face', {
      token: other.token,
      form: { validationToken: v2.body.validationToken, file: { data: IMG.bush2, filename: 'selfie.png', type: 'image/png' } },
    });
    t.is(f2.status, 200, f2.text);
    const l2 = await api().post('/identity/nin/link', { token: other.token, json: { linkToken: f2.body.linkToken } });
    t.is(l2.status, 200, l2.text);
    const released = await h.deps.db('auditEvents').where({ type: 'identity.link_released', subjectId: user.userId }).first();
    t.truthy(released, 'the erased holder is recognised by the keyed hash');
    t.is((await h.deps.db('ninLinks').where({ userId: user.userId })).length, 0);
  },
);

test.serial("a DELETE whose Redis purge failed is finished by the retention sweep: the user's keys purged, then user.erased", async (t) => {
  const user = await linkedConsumer(t, IMG.bush1, IMG.bush2, { firstName: 'Deferred', lastName: 'Erasure' });
  const v = await api().post('/identity/bvn/validate', { token: user.token, json: { bvn: user.person.bvn } });
  t.is(v.status, 200, v.text);
  const miss = await api().post('/verify/self', { token: user.token, form: { image: { data: IMG.powell1, filename: 'other.png', type: 'image/png' } } });
  t.is(miss.body.outcome, 'no_match', miss.text);
  const userKeys = async () => (await redisKeys()).filter((k) => k.includes(user.userId));
  t.true((await userKeys()).some((k) => k.includes(':identity:capture:')));
  t.true((await userKeys()).some((k) => k.includes(':biometric:attempts:')));

  // Redis refuses the DELETE's own purge (its DEL fails on the web process's connection; the sweep has its own).
  const { proofToken } = await issueProofToken(h.deps, user.userId, user.sessionId);
  const redis = h.deps.redis;
  const del = redis.del;
  redis.del = (() => Promise.reject(new Error('Redis unreachable'))) as typeof redis.del;
  let deleted;
  try {
    deleted = await api().delete(`/users/${user.userId}`, { token: user.token, json: { proofToken } });
  } finally {
    redis.del = del;
  }
  t.is(deleted.status, 200, deleted.text);
  t.true((await userKeys()).length > 0, 'the keys outlived the DELETE');
  t.is((await h.deps.db('erasures').where({ userId: user.userId }).first()).redisPurgedAt, null);
  t.falsy(await h.deps.db('auditEvents').where({ type: 'user.erased', subjectId: user.userId }).first(), 'no receipt while Redis holds copies');

  // The sweep (every second here) takes over once the DELETE's grace period (60 s) has passed: moved back, not waited for.
  await h.deps
    .db('erasures')
    .where({ userId: user.userId })
    .update({ requestedAt: new Date(Date.now() - 120_000) });
  const t0 = Date.now();
  let receipt;
  while (!(receipt = await h.deps.db('auditEvents').where({ type: 'user.erased', subjectId: user.userId }).first()) && Date.now() - t0 < 15_000)
    await new Promise((r) => setTimeout(r, 200));
  t.truthy(receipt, 'user.erased once the sweep purged Redis');
  t.deepEqual(await userKeys(), [], 'the capture, the validation and the biometric failure count are gone');
  t.truthy((await h.deps.db('erasures').where({ userId: user.userId }).first()).redisPurgedAt);
});

/** Every value under the test's prefix (strings and hash fields), as raw bytes. */
async function redisValues(): Promise<Map<string, Buffer[]>> {
  const out = new Map<string, Buffer[]>();
  for (const key of await redisKeys()) {
    const type = await h.deps.redis.type(key);
    if (type === 'string') out.set(key, [(await h.deps.redis.getBuffer(key))!]);
    else if (type === 'hash') out.set(key, Object.values(await h.deps.redis.hgetallBuffer(key)));
  }
  return out;
}

const IMAGE_MAGIC = [Buffer.from([0x89, 0x50, 0x4e, 0x47]), Buffer.from([0xff, 0xd8, 0xff])];

test.serial(
  'Redis holds no face: the registry photo of a validation, the reusable capture and the link-token embedding are sealed, and the key is not in Redis',
  async (t) => {
    const person = await enrolPerson(IMG.bush1, { firstName: 'Sealed', lastName: 'Redis' });
    const user = await newConsumer(h);
    const v = await api().post('/identity/nin/validate', { token: user.token, json: { nin: person.nin } });
    t.is(v.status, 200, v.text);
    const afterValidate = await redisValues();
    const validation = [...afterValidate.entries()].find(([k]) => k.includes(':identity:validation:'));
    t.truthy(validation, 'the validation is in Redis');
    const photoField = (await h.deps.redis.hgetBuffer(validation![0], 'photo'))!;
    t.false(
      IMAGE_MAGIC.some((m) => photoField.subarray(0, m.length).equals(m)),
      'the registry photo is not stored as an image',
    );
    t.is(KeyRing.keyIdOf(photoField), 'k1');

    const f = await api().post('/identity/nin/verify-face', {
      token: user.token,
      form: { validationToken: v.body.validationToken, file: { data: IMG.bush2, filename: 'selfie.png', type: 'image/png' } },
    });
    t.is(f.status, 200, f.text);
    const values = await redisValues();
    const capture = [...values.entries()].find(([k]) => k.includes(`:identity:capture:${user.userId}`));
    t.truthy(capture, 'the reusable capture is in Redis');
    const link = [...values.entries()].find(([k]) => k.includes(`:identity:link:nin:${user.userId}:`));
    t.truthy(link, 'the link token is in Redis');
    const claims = JSON.parse(link![1][0]!.toString('utf8'));
    t.is(KeyRing.keyIdOf(Buffer.from(claims.embedding, 'base64')), 'k1');
    // No value anywhere in Redis holds a template in clear, an image, or the key that seals them.
    const key = Buffer.from(K1, 'base64');
    for (const [k, bufs] of values) {
      for (const b of bufs) {
        t.false(holdsClearTemplate(b) || holdsClearTemplate(b.toString('utf8')), `${k} holds a template in clear`);
        t.false(holdsClearTemplate(Object.values(tryJson(b))), `${k} holds a template in clear (JSON)`);
        t.false(b.includes(key) || b.toString('utf8').includes(K1), `${k} holds the sealing key`);
        t.false(
          IMAGE_MAGIC.some((m) => b.subarray(0, m.length).equals(m)),
          `${k} holds an image`,
        );
      }
    }
    // The check is not blind: opened with the key, the capture is a template.
    const ring = KeyRing.from({ biometricKeys: `k1:${K1}`, biometricActiveKeyId: 'k1' });
    const sealedCapture = (await h.deps.redis.hgetBuffer(capture![0], 'embedding'))!;
    t.true(holdsClearTemplate(ring.open('templates', sealedCapture, `capture:${user.userId}`)));
    // And the workflow still works on the sealed values: the link lands, the BVN reuses the capture.
    const l = await api().post('/identity/nin/link', { token: user.token, json: { linkToken: f.body.linkToken } });
    t.is(l.status, 200, l.text);
    const vb = await api().post('/identity/bvn/validate', { token: user.token, json: { bvn: person.bvn } });
    t.is(vb.status, 200, vb.text);
    const fb = await api().post('/identity/bvn/verify-face', { token: user.token, form: { validationToken: vb.body.validationToken, reuseCapture: 'true' } });
    t.is(fb.status, 200, fb.text);
    t.is(fb.body.outcome, 'match');
  },
);

function tryJson(b: Buffer): Record<string, unknown> {
  try {
    const v = JSON.parse(b.toString('utf8'));
    return v && typeof v === 'object' ? v : {};
  } catch {
    return {};
  }
}

test.serial('search snapshots are private and sealed: 0700 / 0600, and no user id or template in clear in any file', async (t) => {
  const dir = h.config.search.snapshotDir;
  const snaps = readdirSync(dir).filter((d) => d.startsWith('snap-'));
  t.true(snaps.length >= 1, 'the search worker has written a snapshot');
  t.is(statSync(dir).mode & 0o777, 0o700);
  for (const snap of snaps) {
    t.is(statSync(path.join(dir, snap)).mode & 0o777, 0o700, snap);
    for (const f of readdirSync(path.join(dir, snap))) t.is(statSync(path.join(dir, snap, f)).mode & 0o777, 0o600, `${snap}/${f}`);
  }
  // The ids the snapshots hold (decrypted with the key), and what the files on disk show of them: nothing.
  const ids = (await snapshotIdLists()).flat();
  t.true(ids.length >= 1, 'the snapshots list enrolled users');
  for (const snap of snaps) {
    for (const f of readdirSync(path.join(dir, snap)).filter((n) => n !== 'meta.json')) {
      const bytes = readFileSync(path.join(dir, snap, f));
      t.false(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i.test(bytes.toString('latin1')), `${snap}/${f} holds a user id in clear`);
      t.false(holdsClearTemplate(bytes), `${snap}/${f} holds a template in clear`);
    }
    const meta = readFileSync(path.join(dir, snap, 'meta.json'), 'utf8');
    t.false(
      ids.some((id) => meta.includes(id)),
      `${snap}/meta.json names no user`,
    );
  }
});

test.serial(
  'retention: the repeatable BullMQ job purges search logs, closed disputes and audit events past their RETENTION_DAYS_*, keeps the rest, and audits the counts',
  async (t) => {
    const user = await newConsumer(h);
    const daysAgo = (d: number) => new Date(Date.now() - d * 86_400_000);
    // One transaction: the sweep (every second) sees every fixture or none, never a log of a kept
    // dispute before the dispute that keeps it.
    const trx = await h.deps.db.transaction();
    const log = async (createdAt: Date) =>
      (
        await trx('searchLogs')
          .insert({ kind: 'verify_self', userId: user.userId, outcome: 'match', latencyMs: JSON.stringify({ total: 1 }), createdAt })
          .returning('id')
      )[0].id as string;
    const oldLog = await log(daysAgo(500));
    const recentLog = await log(daysAgo(10));
    const oldLogOfOpenDispute = await log(daysAgo(500));
    const oldLogOfClosedDispute = await log(daysAgo(500));
    const [openDispute] = await trx('disputes')
      .insert({ searchLogId: oldLogOfOpenDispute, userId: user.userId, status: 'open', createdAt: daysAgo(3000), updatedAt: daysAgo(3000) })
      .returning('id');
    const [closedDispute] = await trx('disputes')
      .insert({ searchLogId: oldLogOfClosedDispute, userId: user.userId, status: 'resolved', createdAt: daysAgo(3000), updatedAt: daysAgo(2500) })
      .returning('id');
    const [oldAudit] = await trx('auditEvents')
      .insert({
        type: 'profile.changed',
        actorType: 'consumer',
        actorId: user.userId,
        subjectType: 'user',
        subjectId: user.userId,
        data: {},
        createdAt: daysAgo(2500),
      })
      .returning('id');
    await trx.commit();

    const connection = h.deps.redis.duplicate();
    const queue = new Queue('upstream', { connection, prefix: bullPrefix(h.config.redis.prefix) });
    try {
      const schedulers = await queue.getJobSchedulers();
      t.true(
        schedulers.some((s) => s.key === 'retention-sweep'),
        'the retention job is a repeatable job',
      );
    } finally {
      await queue.close();
      connection.disconnect();
    }
    // RETENTION_SWEEP_INTERVAL_SECONDS is 1 here: wait until a run after the fixtures has taken every
    // row past its period (one run or several), then check what had to stay.
    const left = async (table: string, id: string) => Boolean(await h.deps.db(table).where({ id }).first());
    const t0 = new Date();
    let run;
    for (let i = 0; i < 150; i++) {
      await new Promise((r) => setTimeout(r, 200));
      run = await h.deps.db('auditEvents').where({ type: 'retention.purged' }).where('createdAt', '>', t0).first();
      const gone =
        !(await left('searchLogs', oldLog)) &&
        !(await left('disputes', closedDispute.id)) &&
        !(await left('searchLogs', oldLogOfClosedDispute)) &&
        !(await left('auditEvents', oldAudit.id));
      if (run && gone) break;
    }
    t.truthy(run, 'a retention run after the fixtures');
    t.false(await left('searchLogs', oldLog));
    t.true(await left('searchLogs', recentLog));
    t.true(await left('disputes', openDispute.id), 'an open dispute is never purged');
    t.true(await left('searchLogs', oldLogOfOpenDispute), 'the log of a kept dispute stays with it');
    t.false(await left('disputes', closedDispute.id));
    t.false(await left('searchLogs', oldLogOfClosedDispute));
    t.false(await left('auditEvents', oldAudit.id));
    t.deepEqual(Object.keys(run.data.counts).sort(), ['auditEvents', 'dedupeCaptures', 'disputes', 'refreshTokens', 'searchLogs', 'webhookEvents']);
  },
);

test.serial('GET /users/{id}/export: everything held about the consumer, numbers masked, never a template; own id only', async (t) => {
  const user = await linkedConsumer(t, IMG.powell1, IMG.powell2, { firstName: 'Export', lastName: 'Me' });
  const v = await api().post('/verify/self', { token: user.token, form: { image: { data: IMG.powell2, filename: 'selfie.png', type: 'image/png' } } });
  t.is(v.status, 200, v.text);
  const d = await api().post('/disputes', { token: user.token, json: { referenceId: v.body.referenceId, reason: 'not me' } });
  t.is(d.status, 201, d.text);

  t.truthy(v.body.proofToken, 'the selfie matched: its proof steps the export up');
  const res = await api().get(`/users/${user.userId}/export`, { token: user.token, headers: { 'x-proof-token': v.body.proofToken } });
  t.is(res.status, 200, res.text);
  t.regex(String(res.headers.get('content-disposition')), /attachment/);
  const body = res.body;
  t.is(body.profile.id, user.userId);
  t.is(body.profile.name, 'Export Me');
  t.is(body.links.length, 1);
  t.is(body.links[0].registry, 'nin');
  t.is(body.links[0].number, `••••••••${user.person.nin.slice(-3)}`);
  t.is(body.links[0].registryRecord.firstName, 'Export');
  t.deepEqual(Object.keys(body.preferences).sort(), ['language', 'marketingOptIn', 'notifyChannel']);
  t.true(body.history.some((h: { referenceId: string }) => h.referenceId === v.body.referenceId));
  t.is(body.disputes.length, 1);
  t.is(body.disputes[0].reason, 'not me');
  t.true(body.biometric.templateEnrolled);
  // No full number, no template anywhere in the document.
  t.false(res.text.includes(user.person.nin));
  t.false(holdsClearTemplate(body));
  t.false(/embedding/i.test(JSON.stringify(Object.keys(body.biometric))));

  // Another consumer's id: 403; a deleted user: 404.
  const other = await newConsumer(h);
  t.is((await api().get(`/users/${user.userId}/export`, { token: other.token })).status, 403);
  t.is((await api().get(`/users/${user.userId}/export`)).status, 401);
});

test.serial('rotation: with both keys configured every template is re-encrypted, then a ring holding only the new key opens them all', async (t) => {
  await linkedConsumer(t, IMG.bush1, IMG.bush2, { firstName: 'George', lastName: 'Bush' });
  const both = KeyRing.from({ biometricKeys: `k1:${K1},k2:${K2}`, biometricActiveKeyId: 'k2' });
  const onlyNew = KeyRing.from({ biometricKeys: `k2:${K2}`, biometricActiveKeyId: 'k2' });
  const before = await h.deps.db('canonicalEmbeddings').select('userId', 'embedding');
  t.true(before.length >= 1);
  // Before the rotation the new-key-only ring cannot open them: the rotation has work to do.
  t.throws(() => onlyNew.open('templates', before[0].embedding, before[0].userId), { instanceOf: KeyRingError });
  const plain = new Map(before.map((r: { userId: string; embedding: Buffer }) => [r.userId, both.open('templates', r.embedding, r.userId)]));

  // Resumable in batches of one; the service keeps answering meanwhile.
  const templates = async () => (await rotateKeyRing(h.deps.db, both, { batchSize: 1 })).families.find((f) => f.family === 'face templates')!;
  const result = await templates();
  t.is(result.resealed, before.length);
  t.deepEqual(result.byKey, { k2: before.length });
  t.is((await templates()).resealed, 0);

  const after = await h.deps.db('canonicalEmbeddings').select('userId', 'embedding', 'keyId');
  for (const r of after) {
    t.is(r.keyId, 'k2');
    t.deepEqual(onlyNew.open('templates', r.embedding, r.userId), plain.get(r.userId));
  }
  // The repository and a search replica's full build read them with the new key alone.
  const repo = new EmbeddingsRepository(h.deps.db, onlyNew);
  t.is((await repo.findMany(after.map((r: { userId: string }) => r.userId))).length, after.length);
  let built = 0;
  await new PgChangeLogSource(h.deps.db, onlyNew).readAll(
    FACE_ENGINE_VERSION,
    { firstRows: 1, pageSize: 10 },
    (rows) => void (built += rows.length),
    (rows) => void (built += rows.length),
  );
  t.is(built, after.length);
  t.deepEqual([], await columnsWithClearTemplates());
  t.truthy(await h.deps.db('auditEvents').where({ type: 'biometric.key_rotated' }).first());
});
