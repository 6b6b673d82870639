/**
 * SPEC 14.2 "keys and logs": every process kind (web, face, search, upstream), started with each secret
 * setting set to a recognisable value, prints none of those values in any line it writes while it
 * starts (and stops): the start-up configuration shows a secret as set or unset, a signing key by its
 * thumbprint, the key ring by its key ids; ADMIN_IDENTIFIER is not printed. A private key in
 * JWT_PREVIOUS_PUBLIC_KEYS stops the process at start, naming the variable and not the key.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import path from 'node:path';
import { ROOT, useHarness } from './helpers/harness.js';
import { freePort } from '../scripts/lib/private-services.js';

const h = useHarness(test);

const pem = (k: { export(o: object): string | Buffer }, type: 'pkcs8' | 'spki') => k.export({ type, format: 'pem' }).toString();
const signing = generateKeyPairSync('ed25519');
const previous = generateKeyPairSync('ed25519');
const body = (p: string) => p.split('\n').slice(1, -2).join('');

/** Each secret setting with a value whose text is recognisable in a log line. */
const SECRETS: Record<string, string> = {
  JWT_PRIVATE_KEY: pem(signing.privateKey, 'pkcs8'),
  JWT_PREVIOUS_PUBLIC_KEYS: pem(previous.publicKey, 'spki'),
  BIOMETRIC_KEYS: `k1:${Buffer.from('RECOGNISABLE-biometric-key-32byt').toString('base64')}`,
  LINK_NUMBER_HASH_KEY: Buffer.from('RECOGNISABLE-link-number-hash-key').toString('base64'),
  MFA_ENCRYPTION_KEY: Buffer.from('RECOGNISABLE-mfa-encryption-key!').toString('base64'),
  OTP_SECRET: 'RECOGNISABLE-otp-secret-of-at-least-32-characters',
  SMS_WEBHOOK_TOKEN: 'RECOGNISABLE-sms-webhook-token',
  METRICS_TOKEN: 'RECOGNISABLE-metrics-token-of-32-characters',
  ADMIN_IDENTIFIER: 'recognisable-first-admin',
  ADMIN_PASSWORD: 'RECOGNISABLE-admin-password',
};
/** What must not appear: each value, and for PEM keys their base64 body (a line may re-wrap it). */
const NEEDLES: Array<[string, string]> = Object.entries(SECRETS).flatMap(([env, v]) =>
  v.includes('-----BEGIN') ? ([[env, body(v)]] as Array<[string, string]>) : [[env, v], ...(v.length > 40 ? [[env, v.slice(0, 24)] as [string, string]] : [])],
);
NEEDLES.push(['BIOMETRIC_KEYS', SECRETS.BIOMETRIC_KEYS!.slice(3)], ['BIOMETRIC_KEYS', 'RECOGNISABLE-biometric'], ['LINK_NUMBER_HASH_KEY', 'RECOGNISABLE-link']);

function run(entry: string, env: Record<string, string>, settleMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, entry)], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let timer: NodeJS.Timeout | undefined;
    const onData = (d: Buffer) => {
      output += d.toString();
      // Give it `settleMs` after its first line to finish starting, then stop it (its stop lines count too).
      timer ??= setTimeout(() => child.kill('SIGTERM'), settleMs);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    const hard = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('exit', (code) => {
      clearTimeout(hard);
      if (timer) clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

const KINDS: Array<[string, string, number]> = [
  ['web', 'processes/web.ts', 8_000],
  ['face', 'processes/face.ts', 15_000],
  ['search', 'processes/search.ts', 8_000],
  ['upstream', 'processes/upstream.ts', 6_000],
];

test('no start-up line of web, face, search or upstream carries a secret setting, ADMIN_IDENTIFIER included', async (t) => {
  const runs = await Promise.all(
    KINDS.map(async ([kind, entry, settle]) => {
      const env = {
        ...h.env,
        ...SECRETS,
        NODE_ENV: 'development',
        LOG_FORMAT: 'json',
        LOG_LEVEL: 'debug',
        SMS_TRANSPORT: 'webhook',
        SMS_WEBHOOK_URL: 'http://127.0.0.1:9/sms',
        PORT: String(await freePort()),
        FACE_ENGINE_PORT: String(await freePort()),
        SEARCH_HEALTH_PORT: String(await freePort()),
      };
      return { kind, ...(await run(entry, env, settle)) };
    }),
  );
  for (const { kind, output } of runs) {
    t.regex(output, new RegExp(`"msg":"${kind} starting`), `${kind} logged its start:\n${output.slice(0, 2000)}`);
    const config = output
      .split('\n')
      .filter((l) => l.includes(`${kind} starting`))
      .map((l) => JSON.parse(l) as { config: Record<string, string> })[0]!.config;
    t.is(config.OTP_SECRET, 'set', kind);
    t.is(config.ADMIN_IDENTIFIER, 'set', kind);
    t.regex(config.JWT_PRIVATE_KEY!, /^set \(kid [A-Za-z0-9_-]{43}\)$/, kind);
    t.regex(config.JWT_PREVIOUS_PUBLIC_KEYS!, /^set \(kid [A-Za-z0-9_-]{43}\)$/, kind);
    t.is(config.BIOMETRIC_KEYS, 'set (key ids k1)', kind);
    t.is(config.SMS_WEBHOOK_TOKEN, 'set', kind);
    t.is(config.REDIS_PASSWORD ?? 'absent', 'absent');
    for (const [env, needle] of NEEDLES) t.false(output.includes(needle), `${kind} printed ${env}`);
  }
});

test('a private key in JWT_PREVIOUS_PUBLIC_KEYS: the process refuses to start, naming the variable, never the key', async (t) => {
  const privatePem = pem(previous.privateKey, 'pkcs8');
  const { code, output } = await run('processes/upstream.ts', { ...h.env, NODE_ENV: 'development', JWT_PREVIOUS_PUBLIC_KEYS: privatePem }, 5_000);
  t.not(code, 0);
  t.regex(output, /JWT_PREVIOUS_PUBLIC_KEYS holds a private key/);
  t.false(output.includes(body(privatePem)));
  t.false(output.includes(body(privatePem).slice(0, 20)));
});
