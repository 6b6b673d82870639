/**
 * `npm run seed:registry` enrols a small demonstration population in the registry simulator, from the
 * project's own fixture photos (test/fixtures/faces, provenance in its PROVENANCE.md), and prints their
 * names, NINs and BVNs, so that a new user can try validate → verify-face → link right after `npm start`
 * (use a different photo of the same person as the selfie, e.g. lfw/Bush_2.png for George W. Bush).
 *
 *   npm run seed:registry                       # through the running server's POST /api/enroll (REGISTRY_URL)
 *   npm run seed:registry -- --url http://host:3000/api
 *   npm run seed:registry -- --direct           # straight into PostgreSQL through the simulator's service
 *
 * The registry it calls: `--url`, else REGISTRY_URL, else this machine's PORT, else the running
 * `npm start` of this checkout (var/run/service.json, written by scripts/start.ts, so a service started
 * with `PORT=4000 npm start` is found from another shell), else http://127.0.0.1:3000/api.
 *
 * Idempotent: a person already enrolled with the same name and date of birth is listed, not enrolled again.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { config, givenSettings } from '../processes/config.js';
import { FIXTURES_DIR, photosOf } from '../test/fixtures/faces/labels.js';

interface Demo {
  firstName: string;
  middleName?: string;
  lastName: string;
  dateOfBirth: string;
  gender: 'male' | 'female';
  /** Registry photo, relative to test/fixtures/faces. */
  photo: string;
  /** A different photo of the same person to use as the selfie, when the fixtures have one. */
  selfie?: string;
}

/** The labelled photos of one person (the fixtures label by surname): the first for the registry, the next as the selfie. */
function photosFor(identity: string): Pick<Demo, 'photo' | 'selfie'> {
  const [photo, selfie] = photosOf(identity);
  if (!photo) throw new Error(`no fixture photo is labelled ${identity}`);
  return selfie ? { photo, selfie } : { photo };
}

// Public figures whose photographs ship in Debian/npm packages (see PROVENANCE.md); numbers are random.
const POPULATION: Demo[] = [
  { firstName: 'George', middleName: 'Walker', lastName: 'Bush', dateOfBirth: '1946-07-06', gender: 'male', ...photosFor('Bush') },
  { firstName: 'Colin', middleName: 'Luther', lastName: 'Powell', dateOfBirth: '1937-04-05', gender: 'male', ...photosFor('Powell') },
  { firstName: 'Grace', middleName: 'Brewster', lastName: 'Hopper', dateOfBirth: '1906-12-09', gender: 'female', ...photosFor('Hopper') },
  { firstName: 'Eileen', middleName: 'Marie', lastName: 'Collins', dateOfBirth: '1956-11-19', gender: 'female', ...photosFor('Collins') },
  { firstName: 'Hugo', middleName: 'Rafael', lastName: 'Chavez', dateOfBirth: '1954-07-28', gender: 'male', ...photosFor('Chavez') },
  { firstName: 'Ariel', lastName: 'Sharon', dateOfBirth: '1928-02-26', gender: 'male', ...photosFor('Sharon') },
];

interface Person {
  nin?: string;
  bvn?: string;
  firstName: string;
  middleName?: string;
  lastName: string;
  dateOfBirth: string;
}

interface Row {
  name: string;
  dateOfBirth: string;
  nin: string;
  bvn: string;
  photo: string;
  selfie: string;
  status: 'enrolled' | 'existing';
}

const MIME: Record<string, string> = { '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.webp': 'image/webp' };
const fullName = (p: { firstName: string; middleName?: string | null; lastName: string }) => [p.firstName, p.middleName, p.lastName].filter(Boolean).join(' ');
const sameName = (a: string | null | undefined, b: string | null | undefined) => (a ?? '').trim().toLowerCase() === (b ?? '').trim().toLowerCase();
const samePerson = (p: Person, d: Demo) =>
  sameName(p.firstName, d.firstName) && sameName(p.lastName, d.lastName) && sameName(p.middleName, d.middleName) && p.dateOfBirth === d.dateOfBirth;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

interface Backend {
  find(d: Demo): Promise<Person | null>;
  enrol(d: Demo, photo: Buffer): Promise<Person>;
  close(): Promise<void>;
}

function httpBackend(baseUrl: string): Backend {
  const timeout = () => AbortSignal.timeout(15_000);
  return {
    async find(d) {
      const res = await fetch(`${baseUrl}/search?name=${encodeURIComponent(fullName(d))}&pageSize=100`, { signal: timeout() });
      if (!res.ok) throw new Error(`GET ${baseUrl}/search answered ${res.status}: ${await res.text()}`);
      const page = (await res.json()) as { items: Person[] };
      return page.items.find((p) => samePerson(p, d)) ?? null;
    },
    async enrol(d, photo) {
      const form = new FormData();
      for (const [k, v] of Object.entries({
        firstName: d.firstName,
        middleName: d.middleName,
        lastName: d.lastName,
        dateOfBirth: d.dateOfBirth,
        gender: d.gender,
        issue: 'both',
      })) {
        if (v) form.append(k, v);
      }
      form.append('photo', new Blob([new Uint8Array(photo)], { type: MIME[path.extname(d.photo)] ?? 'application/octet-stream' }), path.basename(d.photo));
      const res = await fetch(`${baseUrl}/enroll`, { method: 'POST', body: form, signal: timeout() });
      if (res.status !== 201) throw new Error(`POST ${baseUrl}/enroll answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as { person: Person }).person;
    },
    async close() {},
  };
}

async function directBackend(): Promise<Backend> {
  const cfg = config();
  const { createDb } = await import('../platform/database/db.js');
  const { registrySimulatorOn } = await import('../features/registry-simulator/simulator.js');
  const db = createDb(cfg.database.url, 2);
  const sim = registrySimulatorOn(db, { maxImagePixels: cfg.http.maxImagePixels });
  return {
    find: (d) => sim.findByNameAndBirth(d) as Promise<Person | null>,
    enrol: (d, photo) => sim.enrol({ ...d, issue: 'both', photo }) as Promise<Person>,
    close: () => db.destroy(),
  };
}

function printTable(rows: Row[]): void {
  const headers: Record<keyof Row, string> = {
    name: 'Name',
    dateOfBirth: 'Date of birth',
    nin: 'NIN',
    bvn: 'BVN',
    photo: 'Registry photo',
    selfie: 'Try as selfie',
    status: 'Status',
  };
  const keys = Object.keys(headers) as (keyof Row)[];
  const width = (k: keyof Row) => Math.max(headers[k].length, ...rows.map((r) => r[k].length));
  const line = (cells: Record<keyof Row, string>) => keys.map((k) => cells[k].padEnd(width(k))).join('  ');
  console.log(line(headers));
  console.log(keys.map((k) => '-'.repeat(width(k))).join('  '));
  for (const r of rows) console.log(line(r));
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The registry of the `npm start` running from this checkout, when one is (its pid alive). */
function runningServiceRegistry(): string | undefined {
  const file = path.resolve(ROOT, config().supervisor.serviceFile);
  if (!existsSync(file)) return undefined;
  try {
    const info = JSON.parse(readFileSync(file, 'utf8')) as { pid: number; url: string };
    process.kill(info.pid, 0);
    return `${info.url.replace(/\/+$/, '')}/api`;
  } catch {
    return undefined;
  }
}

function registryUrl(): string {
  const explicit = arg('--url');
  if (explicit) return explicit;
  const given = givenSettings();
  if (given.has('REGISTRY_URL') || given.has('PORT')) return config().registry.url;
  return runningServiceRegistry() ?? config().registry.url;
}

async function main(): Promise<void> {
  const direct = process.argv.includes('--direct');
  const baseUrl = registryUrl().replace(/\/+$/, '');
  const backend = direct ? await directBackend() : httpBackend(baseUrl);
  const rows: Row[] = [];
  try {
    for (const d of POPULATION) {
      const photo = readFileSync(path.join(FIXTURES_DIR, d.photo));
      let person = await backend.find(d);
      const status = person ? 'existing' : 'enrolled';
      person ??= await backend.enrol(d, photo);
      rows.push({
        name: fullName(d),
        dateOfBirth: d.dateOfBirth,
        nin: person.nin ?? '-',
        bvn: person.bvn ?? '-',
        photo: d.photo,
        selfie: d.selfie ?? '-',
        status,
      });
    }
  } catch (e) {
    const err = e as Error;
    // fetch rejects with a TypeError ('fetch failed') when nothing answers, a TimeoutError when it hangs.
    if (!direct && (err.name === 'TypeError' || err.name === 'TimeoutError')) {
      console.error(
        `The registry at ${baseUrl} is not reachable (${err.name === 'TimeoutError' ? 'timed out' : 'no answer'}). Start the server (npm start) or use --direct.`,
      );
    } else {
      console.error(err.message);
    }
    process.exitCode = 1;
  } finally {
    await backend.close();
  }
  if (rows.length) {
    console.log(
      `Registry ${direct ? '(direct, PostgreSQL)' : baseUrl}: ${rows.filter((r) => r.status === 'enrolled').length} enrolled, ${rows.filter((r) => r.status === 'existing').length} already present. Photos under test/fixtures/faces/.`,
    );
    printTable(rows);
  }
}

await main();
