/**
 * The registry values a validation and a link token keep in Redis (the NIN or BVN, and the registry
 * record: name, date of birth, gender) are sealed with the key ring like the biometric values, read
 * from Redis itself: a Redis dump, an RDB/AOF file or a replica holds no identity.
 */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { IdentityTokenStore, type LinkClaims } from '../../features/identity/identity-tokens.js';
import { KeyRing } from '../../platform/keys/key-ring.js';
import { hashToken } from '../../platform/redis/single-use-token.js';
import { useHarness, ROOT } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer } from '../helpers/principals.js';

const K1 = randomBytes(32).toString('base64');
const ring = KeyRing.from({ biometricKeys: `k1:${K1}`, biometricActiveKeyId: 'k1' });
const h = useHarness(test, { env: { BIOMETRIC_KEYS: `k1:${K1}`, BIOMETRIC_ACTIVE_KEY_ID: 'k1' } });
const api = () => client(h.url);

const PERSON = { firstName: 'Adaeze', middleName: 'Chiamaka', lastName: 'Okonkwo-Sealed', dateOfBirth: '1961-07-23', gender: 'female' };

/** Every value under the test's prefix, as bytes (strings, hash fields, list items). */
async function redisValues(): Promise<Map<string, Buffer[]>> {
  const out = new Map<string, Buffer[]>();
  let cursor = '0';
  do {
    const [next, found] = await h.deps.redis.scan(cursor, 'MATCH', `${h.config.redis.prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of found) {
      const type = await h.deps.redis.type(key);
      if (type === 'string') out.set(key, [(await h.deps.redis.getBuffer(key))!]);
      else if (type === 'hash') out.set(key, Object.values(await h.deps.redis.hgetallBuffer(key)));
      else if (type === 'list') out.set(key, await h.deps.redis.lrangeBuffer(key, 0, -1));
    }
  } while (cursor !== '0');
  return out;
}

/** The keys whose values hold any of `needles` in clear. */
function holding(values: Map<string, Buffer[]>, needles: string[]): string[] {
  return [...values.entries()].filter(([, bufs]) => bufs.some((b) => needles.some((n) => b.includes(Buffer.from(n, 'utf8'))))).map(([k]) => k);
}

const identityNeedles = (number: string) => [number, PERSON.firstName, PERSON.middleName, PERSON.lastName, PERSON.dateOfBirth];

test.serial('a validation keeps the NIN and the registry record sealed in Redis', async (t) => {
  const enrol = await api().post('/api/enroll', {
    form: {
      ...PERSON,
      phone: '+2349055501234',
      photo: { data: readFileSync(path.join(ROOT, 'test/fixtures/faces/lfw/Bush_1.png')), filename: 'photo.png', type: 'image/png' },
    },
  });
  t.is(enrol.status, 201, enrol.text);
  const { nin, bvn } = enrol.body.person as { nin: string; bvn: string };
  const user = await newConsumer(h);
  for (const [registry, number] of [
    ['nin', nin],
    ['bvn', bvn],
  ] as const) {
    const v = await api().post(`/identity/${registry}/validate`, { token: user.token, json: { [registry]: number } });
    t.is(v.status, 200, v.text);
    const values = await redisValues();
    const validationKey = [...values.keys()].find((k) => k.endsWith(`:identity:validation:${hashToken(v.body.validationToken)}`));
    t.truthy(validationKey, 'the validation is in Redis');
    t.deepEqual(holding(values, identityNeedles(number)), [], `no ${registry.toUpperCase()}, name or date of birth in clear anywhere in Redis`);
    // The check is not blind: opened with the key, the meta holds them.
    const sealed = (await h.deps.redis.hgetBuffer(validationKey!, 'meta'))!;
    t.is(KeyRing.keyIdOf(sealed), 'k1');
    const meta = JSON.parse(ring.open('registry-values', sealed, `validation-meta:${hashToken(v.body.validationToken)}`).toString('utf8'));
    t.like(meta, { userId: user.userId, registry, number, record: { firstName: PERSON.firstName, dateOfBirth: PERSON.dateOfBirth, gender: 'female' } });
    // And the store still reads it.
    t.like(await new IdentityTokenStore(h.deps.redis, h.deps.keys, ring).validationMeta(v.body.validationToken), { number, registry });
  }
});

test.serial('a link token keeps the number and the record sealed in Redis, and gives them back when taken', async (t) => {
  const store = new IdentityTokenStore(h.deps.redis, h.deps.keys, ring);
  const userId = (await newConsumer(h)).userId;
  const claims: LinkClaims = {
    userId,
    registry: 'nin',
    number: '70000012345',
    record: { firstName: PERSON.firstName, middleName: PERSON.middleName, lastName: PERSON.lastName, dateOfBirth: PERSON.dateOfBirth, gender: PERSON.gender },
    embedding: Buffer.alloc(2048, 1).toString('base64'),
    engineVersion: 'test',
    score: 0.9,
    crossRegistryFlagged: false,
    crossRegistryScore: null,
    captureReused: false,
    qualityScore: 80,
  };
  const linkToken = await store.issueLinkToken(claims, 60);
  const values = await redisValues();
  const linkKeys = [...values.keys()].filter((k) => k.includes(`:identity:link:nin:${userId}:`));
  t.is(linkKeys.length, 1);
  t.deepEqual(holding(values, identityNeedles(claims.number)), [], 'no number, name or date of birth in clear anywhere in Redis');
  const taken = await store.takeLinkToken(linkToken, 'nin', userId);
  t.deepEqual(taken?.claims, claims);
  // Bound to its user and registry: the other route's token is simply not found.
  t.is(await store.takeLinkToken(await store.issueLinkToken(claims, 60), 'bvn', userId), null);
});
