/**
 * `npm run chaos`: the long runs kept out of npm test.
 *   1. the OpenAPI-driven fuzzer (test/fuzz.test.ts) with FUZZ_RUNS requests (default 20,000);
 *   2. the fault suite (chaos/faults.ts) against the real processes, under `npm start` and under the
 *      Procfile layout, on a private PostgreSQL and a private Redis.
 * `npm run chaos -- fuzz` or `npm run chaos -- faults` runs one of them; `npm run chaos -- faults start`
 * (or `procfile`) one layout of the fault suite; `npm run chaos -- ha` the faults of the high-availability
 * layout (chaos/ha.ts, `npm run start:ha`). Run it under `nice -n 10` on a
 * shared machine. Figures and commands are recorded in docs/reliability.md.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const only = process.argv[2];
let failed = false;

if (!only || only === 'fuzz') {
  const runs = process.env.FUZZ_RUNS ?? '20000';
  console.error(`[chaos] fuzzing: ${runs} requests`);
  const r = spawnSync(path.join(ROOT, 'node_modules', '.bin', 'ava'), ['--timeout=60m', '--verbose', 'test/fuzz.test.ts'], {
    cwd: ROOT,
    env: { ...process.env, FUZZ_RUNS: runs },
    stdio: 'inherit',
  });
  failed ||= r.status !== 0;
}
if (!only || only === 'faults') {
  console.error('[chaos] fault suite');
  const layout = only === 'faults' ? process.argv.slice(3) : [];
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'chaos/faults.ts', ...layout], { cwd: ROOT, stdio: 'inherit' });
  failed ||= r.status !== 0;
}
if (only === 'ha') {
  // Only when asked: it brings up the whole high-availability layout (chaos/ha.ts).
  console.error('[chaos] high availability: npm run start:ha under load, one part killed after another');
  // `npm run chaos -- ha --hosts`: the layout across hosts, and partitions besides the kills.
  const r = spawnSync(process.execPath, ['--import', 'tsx', 'chaos/ha.ts', ...process.argv.slice(3)], { cwd: ROOT, stdio: 'inherit' });
  failed ||= r.status !== 0;
}
process.exit(failed ? 1 : 0);
