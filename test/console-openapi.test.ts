/**
 * The OpenAPI document as the console's client sees it: it passes Redocly's recommended lint (with only
 * the reviewed exceptions of .redocly.lint-ignore.yaml), and the committed generated client
 * (console/src/api/openapi.json and schema.d.ts) is exactly what the running code serves, so the client
 * cannot drift from the API. (`npm run typecheck` compiles that client under strict TypeScript.)
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CLIENT_DIR, clientTypes, documentText } from '../scripts/gen-console-client.js';
import { ROOT, startHarness, type Harness } from './helpers/harness.js';

const run = promisify(execFile);
let h: Harness;
let served: Record<string, unknown>;

test.before(async () => {
  h = await startHarness();
  served = (await (await fetch(`${h.url}/openapi.json`)).json()) as Record<string, unknown>;
});
test.after.always(async () => {
  await h?.stop();
});

test('the committed generated client matches what GET /openapi.json serves (npm run gen:client regenerates it)', async (t) => {
  t.is(readFileSync(path.join(CLIENT_DIR, 'openapi.json'), 'utf8'), documentText(served), 'console/src/api/openapi.json is stale: run npm run gen:client');
  t.is(readFileSync(path.join(CLIENT_DIR, 'schema.d.ts'), 'utf8'), await clientTypes(served), 'console/src/api/schema.d.ts is stale: run npm run gen:client');
});

test('every public operation declares its security, and the document names its server', (t) => {
  const paths = served.paths as Record<string, Record<string, { security?: unknown[] }>>;
  for (const [p, ops] of Object.entries(paths)) {
    for (const [m, op] of Object.entries(ops)) t.true(Array.isArray(op.security), `${m.toUpperCase()} ${p} declares security`);
  }
  t.deepEqual(paths['/auth/otp/request']!.post!.security, []);
  t.deepEqual(paths['/operators']!.get!.security, [{ bearerAuth: [] }]);
  t.true(Array.isArray(served.servers) && (served.servers as unknown[]).length > 0);
});

test("Redocly's recommended lint passes on the served document with no error and no unreviewed warning", async (t) => {
  // Lint the served document (not the committed copy) at the path the ignore file names.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-redocly-'));
  const target = path.join(dir, 'console', 'src', 'api');
  await run('mkdir', ['-p', target]);
  writeFileSync(path.join(target, 'openapi.json'), documentText(served));
  writeFileSync(path.join(dir, '.redocly.lint-ignore.yaml'), readFileSync(path.join(ROOT, '.redocly.lint-ignore.yaml')));
  const redocly = path.join(ROOT, 'node_modules', '.bin', 'redocly');
  const { stdout, stderr } = await run(redocly, ['lint', '--format=summary', 'console/src/api/openapi.json'], {
    cwd: dir,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  }).catch((e: { stdout: string; stderr: string }) => {
    t.fail(`redocly lint failed:\n${e.stdout}\n${e.stderr}`);
    return e;
  });
  const out = `${stdout}\n${stderr}`;
  t.regex(out, /Your API description is valid/);
  t.notRegex(out, /^(error|warning)\s/m, out);
  t.regex(out, /1 problem is explicitly ignored/, 'each reviewed exception still applies (remove it from the ignore file when it does not)');
});
