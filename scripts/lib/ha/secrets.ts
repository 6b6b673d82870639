/**
 * The credentials and certificates of a `start:ha` layout, generated at each start into
 * `var/ha/secrets/` (the directory 0700, every file 0600): never written to a log or to layout.json.
 * A part that needs a secret in its own configuration file gets that file 0600 too (owned by the user
 * the part runs as), in a directory only that user can enter.
 *
 * Passwords are 32 random bytes, base64url (no character that needs quoting in a URL, a YAML string,
 * a Redis configuration line or an HAProxy header). Certificates: one CA made here (ECDSA P-256, 30
 * days), and one server certificate per service whose subjectAltName lists every address it is reached
 * at, so that clients verify the name (`sslmode=verify-full`, Node's default for `rediss://`).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const SECRET_NAMES = [
  /** PostgreSQL superuser (Patroni's own connections, rewind). */
  'postgres-superuser',
  /** PostgreSQL streaming replication. */
  'postgres-replication',
  /** The database owner: migrations only (MIGRATION_DATABASE_URL). */
  'postgres-owner',
  /** `faceid_app`, the least-privilege role the processes connect as (DATABASE_URL). */
  'postgres-app',
  /** Redis `requirepass`/`masterauth`, and the Sentinels' `requirepass`/`auth-pass`. */
  'redis',
  /** etcd's `root` user (sets up authentication, nothing else uses it). */
  'etcd-root',
  /** etcd's `patroni` user (read-write on Patroni's keys only). */
  'etcd-patroni',
  /** Patroni REST API (switchover, restart, reinitialise, configuration). */
  'patroni-rest',
] as const;
export type SecretName = (typeof SECRET_NAMES)[number];

export interface Secrets {
  dir: string;
  get(name: SecretName): string;
  /** Every secret's value (to check that none leaks into a file or a log). */
  values(): string[];
}

/** Writes `content` to `file` 0600 (created so: never readable by others, even for an instant). */
export function writePrivate(file: string, content: string | Buffer, owner?: { uid: number; gid: number }): void {
  writeFileSync(file, content, { mode: 0o600 });
  chmodSync(file, 0o600);
  if (owner) chownSync(file, owner.uid, owner.gid);
}

/** A directory only its owner may enter (0700). */
export function privateDir(dir: string, owner?: { uid: number; gid: number }): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  if (owner) chownSync(dir, owner.uid, owner.gid);
  return dir;
}

export function generateSecrets(dir: string): Secrets {
  privateDir(dir);
  const values = new Map<SecretName, string>();
  for (const name of SECRET_NAMES) {
    const value = randomBytes(32).toString('base64url');
    writePrivate(path.join(dir, name), value);
    values.set(name, value);
  }
  return {
    dir,
    get: (name) => values.get(name)!,
    values: () => [...values.values()],
  };
}

export interface Certificates {
  /** The CA every client verifies against. */
  caFile: string;
  /** A certificate and key for a service reached at `addresses`. */
  issue(name: string, addresses: string[], owner?: { uid: number; gid: number }): { certFile: string; keyFile: string };
}

/**
 * openssl under umask 077: every file it writes (keys, signing requests, certificates, the CA's serial)
 * is created 0600, never readable by others even for an instant. The parts that must read a file as
 * another user get a copy of their own (scripts/lib/ha/postgres-patroni.ts); HAProxy reads its CA as
 * root, before it drops to its user.
 */
function openssl(args: string[]): void {
  const r = spawnSync('sh', ['-c', 'umask 077 && exec openssl "$@"', 'openssl', ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${(r.stderr || r.stdout).trim()}`);
}

/**
 * A CA made for this layout, in `dir` (0700; every file in it 0600, the certificates and signing
 * requests too: nothing under var/ha/secrets is for anyone but its owner).
 */
export function makeCertificates(dir: string): Certificates {
  privateDir(dir);
  const caKey = path.join(dir, 'ca.key');
  const caFile = path.join(dir, 'ca.pem');
  openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', caKey]);
  chmodSync(caKey, 0o600);
  openssl(['req', '-x509', '-new', '-key', caKey, '-sha256', '-days', '30', '-subj', '/CN=faceid start:ha CA', '-out', caFile]);
  chmodSync(caFile, 0o600);
  return {
    caFile,
    issue: (name, addresses, owner) => {
      const keyFile = path.join(dir, `${name}.key`);
      const csr = path.join(dir, `${name}.csr`);
      const certFile = path.join(dir, `${name}.pem`);
      const ext = path.join(dir, `${name}.ext`);
      openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', keyFile]);
      chmodSync(keyFile, 0o600);
      openssl(['req', '-new', '-key', keyFile, '-subj', `/CN=${name}`, '-out', csr]);
      const san = addresses.map((a) => (/^[0-9.]+$/.test(a) ? `IP:${a}` : `DNS:${a}`)).join(',');
      writePrivate(ext, `subjectAltName=${san}\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n`);
      openssl(['x509', '-req', '-in', csr, '-CA', caFile, '-CAkey', caKey, '-CAcreateserial', '-sha256', '-days', '30', '-extfile', ext, '-out', certFile]);
      for (const file of [keyFile, csr, certFile, ext, caKey, caFile, path.join(dir, 'ca.srl')]) if (existsSync(file)) chmodSync(file, 0o600);
      if (owner) {
        chownSync(keyFile, owner.uid, owner.gid);
        chownSync(certFile, owner.uid, owner.gid);
      }
      return { certFile, keyFile };
    },
  };
}

/** The CA's certificate (public). */
export const readCa = (certs: Certificates) => readFileSync(certs.caFile, 'utf8');
