/**
 * The writer of `var/ha/secrets/` (scripts/lib/ha/secrets.ts), on its own and fast: every file it
 * leaves there is 0600 (the passwords, the keys, and the certificates, signing requests and serial of
 * the layout's CA too) and every directory 0700, whatever the umask of the command that runs it.
 */
import test from 'ava';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { SECRET_NAMES, generateSecrets, makeCertificates } from '../scripts/lib/ha/secrets.js';

const haveOpenssl = spawnSync('openssl', ['version']).status === 0;

/** Every entry under `dir` with its permission bits. */
function walk(dir: string): { file: string; dir: boolean; mode: number }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    const me = { file: p, dir: e.isDirectory(), mode: statSync(p).mode & 0o777 };
    return e.isDirectory() ? [me, ...walk(p)] : [me];
  });
}

(haveOpenssl ? test : test.skip)('every file under the secrets directory is 0600 and every directory 0700, certificates and signing requests included', (t) => {
  const root = mkdtempSync(path.join(tmpdir(), 'ha-secrets-'));
  // The usual umask of a shell (022): files it creates would be readable by others unless made otherwise.
  const umask = process.umask(0o022);
  try {
    const dir = path.join(root, 'secrets');
    generateSecrets(dir);
    const certs = makeCertificates(path.join(dir, 'tls'));
    certs.issue('redis', ['10.213.0.10', '127.0.0.1']);
    certs.issue('postgres', ['pg1', '10.213.0.18']);
    const entries = walk(dir);
    const files = entries.filter((e) => !e.dir).map((e) => path.basename(e.file));
    // What the layout writes there: the passwords, the CA, and a key, request and certificate per service.
    for (const name of [...SECRET_NAMES, 'ca.key', 'ca.pem', 'redis.key', 'redis.csr', 'redis.pem', 'postgres.pem']) t.true(files.includes(name), name);
    t.is(statSync(dir).mode & 0o777, 0o700, 'secrets/');
    for (const e of entries) t.is(e.mode, e.dir ? 0o700 : 0o600, `${path.relative(root, e.file)} is ${e.mode.toString(8)}`);
  } finally {
    process.umask(umask);
    rmSync(root, { recursive: true, force: true });
  }
});
