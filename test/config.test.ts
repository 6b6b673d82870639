/** The one configuration module: defaults, validation at boot, and production's refusals. */
import test from 'ava';
import { ConfigError, describeConfig, loadConfig } from '../processes/config.js';
import { productionEnv } from './helpers/production-env.js';

test('defaults are usable for local development', (t) => {
  const c = loadConfig({ NODE_ENV: 'development' });
  t.is(c.http.port, 3000);
  t.is(c.database.url, 'postgres://postgres@127.0.0.1:5432/faceid');
  t.is(c.registry.url, 'http://127.0.0.1:3000/api');
  t.is(c.sms.transport, 'outbox');
  t.is(c.identity.linkTokenTtlSeconds, 300);
  t.is(c.identity.proofTokenTtlSeconds, 120);
  t.is(c.queues.faceJobTimeoutMs, 10000);
  t.is(c.identity.crossRegistryMismatchPolicy, 'hard-block');
  t.true(c.face.highConfidenceThreshold >= c.face.matchThreshold);
});

test('environment values are parsed and every invalid one is reported at once', (t) => {
  t.is(loadConfig({ NODE_ENV: 'development', PORT: '8080' }).registry.url, 'http://127.0.0.1:8080/api');
  const err = t.throws(
    () =>
      loadConfig({
        NODE_ENV: 'development',
        PORT: 'eighty',
        OTP_MAX_ATTEMPTS: '0',
        CROSS_REGISTRY_MISMATCH_POLICY: 'maybe',
        TRUST_PROXY: 'perhaps',
        REDIS_URL: 'not a url',
      }),
    { instanceOf: ConfigError },
  );
  t.is((err as ConfigError).problems.length, 5);
});

test('production refuses the development signing key and the SMS outbox', (t) => {
  const err = t.throws(() => loadConfig({ NODE_ENV: 'production', SMS_TRANSPORT: 'outbox' }), { instanceOf: ConfigError });
  const text = (err as ConfigError).problems.join('\n');
  t.regex(text, /JWT_PRIVATE_KEY/);
  t.regex(text, /outbox/);
  // With real settings it starts, and the SMS transport defaults to the webhook.
  const BIOMETRIC_KEYS = `k1:${Buffer.alloc(32, 7).toString('base64')}`;
  const LINK_NUMBER_HASH_KEY = Buffer.alloc(32, 9).toString('base64');
  const ok = loadConfig({
    NODE_ENV: 'production',
    JWT_PRIVATE_KEY: '-----BEGIN PRIVATE KEY-----x',
    BIOMETRIC_KEYS,
    LINK_NUMBER_HASH_KEY,
    SMS_WEBHOOK_URL: 'https://sms.example/send',
    REGISTRY_URL: 'https://registry.example/v1',
    REDIS_URL: 'redis://:a-redis-password@redis.internal:6379',
    METRICS_TOKEN: 'a-metrics-token-of-at-least-32-characters',
    OTP_SECRET: 'an-otp-secret-of-at-least-32-characters',
  });
  t.false(ok.registry.simulator, 'the simulator is not mounted in production');
  t.is(ok.sms.transport, 'webhook');
  const base = {
    NODE_ENV: 'production',
    JWT_PRIVATE_KEY: 'k',
    BIOMETRIC_KEYS,
    LINK_NUMBER_HASH_KEY,
    SMS_WEBHOOK_URL: 'https://x',
    REGISTRY_URL: 'https://registry.example/v1',
    REDIS_URL: 'redis://:a-redis-password@redis.internal:6379',
    METRICS_TOKEN: 'a-metrics-token-of-at-least-32-characters',
    OTP_SECRET: 'an-otp-secret-of-at-least-32-characters',
  };
  t.throws(() => loadConfig({ ...base, REGISTRY_SIM_FAULT: 'error' }), { instanceOf: ConfigError });
  // The simulator lets anyone enrol an identity: never in production, and never the default registry there.
  t.throws(() => loadConfig({ ...base, REGISTRY_SIMULATOR: 'true' }), { instanceOf: ConfigError });
  const noRegistry = t.throws(() => loadConfig({ ...base, REGISTRY_URL: '' }), { instanceOf: ConfigError });
  t.regex((noRegistry as ConfigError).problems.join('\n'), /REGISTRY_URL/);
  // Erased accounts keep a keyed hash of their numbers: never under the public development key.
  const noHashKey = t.throws(() => loadConfig({ ...base, LINK_NUMBER_HASH_KEY: '' }), { instanceOf: ConfigError });
  t.regex((noHashKey as ConfigError).problems.join('\n'), /LINK_NUMBER_HASH_KEY/);
});

test('production refuses a Redis without a password, a short number-hash key and WEBHOOK_ALLOW_PRIVATE', (t) => {
  const base = {
    NODE_ENV: 'production',
    JWT_PRIVATE_KEY: 'k',
    BIOMETRIC_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
    LINK_NUMBER_HASH_KEY: Buffer.alloc(32, 9).toString('base64'),
    SMS_WEBHOOK_URL: 'https://x',
    REGISTRY_URL: 'https://registry.example/v1',
    REDIS_URL: 'rediss://faceid:a-redis-password@redis.internal:6380/2',
    METRICS_TOKEN: 'a-metrics-token-of-at-least-32-characters',
    OTP_SECRET: 'an-otp-secret-of-at-least-32-characters',
  };
  t.notThrows(() => loadConfig(base));
  const refused = (env: Record<string, string>, pattern: RegExp) => {
    const err = t.throws(() => loadConfig({ ...base, ...env }), { instanceOf: ConfigError }, JSON.stringify(env));
    t.regex((err as ConfigError).problems.join('\n'), pattern);
  };
  // Redis holds one-time codes, single-use tokens and the queued jobs: never open to whoever reaches it.
  refused({ REDIS_URL: 'redis://redis.internal:6379' }, /REDIS_URL must carry the Redis password/);
  refused({ REDIS_URL: 'redis://faceid@redis.internal:6379' }, /REDIS_URL must carry the Redis password/);
  refused({ REDIS_URL: '' }, /REDIS_URL must carry the Redis password/);
  // With Sentinels the URL gives the password for the master and the Sentinels.
  refused({ REDIS_URL: '', REDIS_SENTINELS: 's1:26379,s2:26379' }, /REDIS_URL must carry the Redis password/);
  t.notThrows(() => loadConfig({ ...base, REDIS_URL: 'redis://:pw-for-all@ignored:6379', REDIS_SENTINELS: 's1:26379,s2:26379' }));
  // An 11-digit number space is small: the hash key must not be.
  refused({ LINK_NUMBER_HASH_KEY: Buffer.alloc(31, 9).toString('base64') }, /LINK_NUMBER_HASH_KEY must be at least 32 bytes/);
  refused({ LINK_NUMBER_HASH_KEY: 'c2hvcnQ=' }, /LINK_NUMBER_HASH_KEY must be at least 32 bytes/);
  refused({ WEBHOOK_ALLOW_PRIVATE: 'true' }, /WEBHOOK_ALLOW_PRIVATE=true is refused in production/);
  t.notThrows(() => loadConfig({ ...base, WEBHOOK_ALLOW_PRIVATE: 'false', WEBHOOK_PRIVATE_CIDRS: '10.20.0.0/16' }));
  // Outside production all three stay as they were: local Redis without a password, the development key.
  const dev = loadConfig({ NODE_ENV: 'development', LINK_NUMBER_HASH_KEY: 'c2hvcnQ=', WEBHOOK_ALLOW_PRIVATE: 'true' });
  t.is(dev.redis.url, 'redis://127.0.0.1:6379');
  t.true(dev.webhooks.allowPrivate);
});

test('NODE_ENV unset means production: without its settings the service refuses to start; with them, no simulator, staff MFA required', (t) => {
  const err = t.throws(() => loadConfig({}), { instanceOf: ConfigError });
  const text = (err as ConfigError).problems.join('\n');
  t.regex(text, /JWT_PRIVATE_KEY/);
  t.regex(text, /REGISTRY_URL/);
  t.regex(text, /BIOMETRIC_KEYS/);
  const c = loadConfig({
    JWT_PRIVATE_KEY: 'k',
    BIOMETRIC_KEYS: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
    LINK_NUMBER_HASH_KEY: Buffer.alloc(32, 9).toString('base64'),
    SMS_WEBHOOK_URL: 'https://sms.example/send',
    REGISTRY_URL: 'https://registry.example/v1',
    REDIS_URL: 'redis://:a-redis-password@redis.internal:6379',
    METRICS_TOKEN: 'a-metrics-token-of-at-least-32-characters',
    OTP_SECRET: 'an-otp-secret-of-at-least-32-characters',
  });
  t.is(c.runtime.nodeEnv, 'production');
  t.true(c.isProduction);
  t.false(c.registry.simulator);
  t.is(c.sms.transport, 'webhook');
  t.is(c.operators.staffMfa, 'required');
  t.is(loadConfig({ NODE_ENV: 'development' }).operators.staffMfa, 'optional');
});

test('npm start, npm test and the developer scripts say development explicitly (unless NODE_ENV is given)', async (t) => {
  const { readFileSync } = await import('node:fs');
  const scripts = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts;
  for (const name of [
    'start',
    'test',
    'start:web',
    'start:face',
    'start:search',
    'migrate',
    'create-admin',
    'unlock-operator',
    'seed:registry',
    'bench',
    'chaos',
    'docs:config',
    'gen:client',
  ]) {
    t.true(scripts[name]!.includes('NODE_ENV=${NODE_ENV:-development}'), name);
  }
  // The Procfile (production) does not.
  t.false(readFileSync(new URL('../Procfile', import.meta.url), 'utf8').includes('NODE_ENV'));
});

test('thresholds must be ordered', (t) => {
  t.throws(() => loadConfig({ NODE_ENV: 'development', MATCH_THRESHOLD: '0.6', HIGH_CONFIDENCE_THRESHOLD: '0.5' }), { instanceOf: ConfigError });
});

test('docs/configuration.md is generated from the settings table and up to date', async (t) => {
  const { readFileSync } = await import('node:fs');
  const { renderConfigDoc } = await import('../scripts/gen-config-doc.js');
  t.is(readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8'), renderConfigDoc(), 'run npm run docs:config');
});

test('the start-up view of the config hides secrets, URL passwords and URL query strings', (t) => {
  const view = describeConfig(
    loadConfig({
      NODE_ENV: 'development',
      DATABASE_URL: 'postgres://app:s3cret@db:5432/faceid',
      SMS_TRANSPORT: 'webhook',
      SMS_WEBHOOK_URL: 'https://sms.example/send?api_key=k3y',
      ADMIN_IDENTIFIER: 'root',
      ADMIN_PASSWORD: 'admin-pass-123',
    }),
  );
  const text = JSON.stringify(view);
  for (const leak of ['s3cret', 'k3y', 'admin-pass-123']) t.false(text.includes(leak), leak);
  t.regex(String(view.SMS_WEBHOOK_URL), /^https:\/\/sms\.example\/send/);
});

test('liveness (SPEC 14.1): the light sequence required, its hold within the flash limit, near copies on, passive only outside production by default', (t) => {
  const c = loadConfig({ NODE_ENV: 'development' });
  t.is(c.liveness.light, 'required');
  t.is(c.liveness.lightHoldMs, 450);
  t.is(c.liveness.nearReplayWindowSeconds, 2_592_000);
  t.is(c.liveness.mode, 'passive');
  t.is(loadConfig({ NODE_ENV: 'development', LIVENESS_LIGHT: 'off' }).liveness.light, 'off');
  t.throws(() => loadConfig({ NODE_ENV: 'development', LIVENESS_LIGHT: 'sometimes' }), { instanceOf: ConfigError });
  // More than three colour changes a second would cross WCAG 2.3.1's flash threshold.
  const fast = t.throws(() => loadConfig({ NODE_ENV: 'development', LIVENESS_LIGHT_HOLD_MS: '200' }), { instanceOf: ConfigError });
  t.regex((fast as ConfigError).problems.join('\n'), /LIVENESS_LIGHT_HOLD_MS/);
  t.is(loadConfig({ NODE_ENV: 'development', LIVENESS_NEAR_REPLAY_WINDOW_SECONDS: '0' }).liveness.nearReplayWindowSeconds, 0);
});

test('SPEC 14.2: production refuses http: for REGISTRY_URL and SMS_WEBHOOK_URL and a missing OTP_SECRET; every mode refuses a private key in JWT_PREVIOUS_PUBLIC_KEYS', async (t) => {
  const base = productionEnv();
  t.notThrows(() => loadConfig(base));
  const refused = (env: Record<string, string>, pattern: RegExp) => {
    const err = t.throws(() => loadConfig({ ...base, ...env }), { instanceOf: ConfigError }, JSON.stringify(env));
    t.regex((err as ConfigError).problems.join('\n'), pattern);
  };
  refused({ REGISTRY_URL: 'http://registry.example/v1' }, /REGISTRY_URL must be https: in production/);
  refused({ SMS_WEBHOOK_URL: 'http://sms.example/send' }, /SMS_WEBHOOK_URL must be https: in production/);
  refused({ OTP_SECRET: '' }, /OTP_SECRET must be set in production/);
  // Outside production a developer's local registry and gateway stay reachable over http.
  t.notThrows(() => loadConfig({ NODE_ENV: 'development', REGISTRY_URL: 'http://127.0.0.1:9/api', SMS_WEBHOOK_URL: 'http://127.0.0.1:9/sms' }));

  const { generateKeyPairSync } = await import('node:crypto');
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const publicPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  for (const NODE_ENV of ['production', 'development', 'test']) {
    const env = { ...base, NODE_ENV, JWT_PREVIOUS_PUBLIC_KEYS: publicPem + privatePem.replace(/\n/g, '\\n') };
    const err = t.throws(() => loadConfig(env), { instanceOf: ConfigError });
    t.regex((err as ConfigError).problems.join('\n'), /JWT_PREVIOUS_PUBLIC_KEYS holds a private key/);
    t.false((err as ConfigError).problems.join('\n').includes(privatePem.split('\n')[1]!), 'the problem never repeats the key');
  }
  t.notThrows(() => loadConfig({ ...base, JWT_PREVIOUS_PUBLIC_KEYS: publicPem }));
});
