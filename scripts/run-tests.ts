/**
 * Runs the ava suite as it is (its output and exit code unchanged) and closes with the plain summary
 * line `N passed, N failed[, N skipped]` that CI tooling reads, parsed from ava's own summary.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ava = spawn(path.join(ROOT, 'node_modules', '.bin', 'ava'), process.argv.slice(2), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });

let tail = '';
let ticks = 0; // ✔ lines: with failures, ava's summary gives only the failed count
let partial = '';
const keep = (chunk: Buffer) => {
  const text = chunk.toString();
  tail = (tail + text).slice(-20_000);
  const lines = (partial + text).split('\n');
  partial = lines.pop() ?? '';
  for (const line of lines) if (/^\s*✔/.test(line.replace(/\x1b\[[0-9;]*m/g, ''))) ticks++;
};
ava.stdout.on('data', (c: Buffer) => {
  process.stdout.write(c);
  keep(c);
});
ava.stderr.on('data', (c: Buffer) => {
  process.stderr.write(c);
  keep(c);
});

const count = (re: RegExp) => {
  const m = [...tail.replace(/\x1b\[[0-9;]*m/g, '').matchAll(re)].at(-1);
  return m ? Number(m[1]) : 0;
};

ava.on('close', (code, signal) => {
  const passed = Math.max(count(/^\s*(\d+) tests? passed/gm), ticks);
  const failed = count(/^\s*(\d+) tests? failed/gm) + count(/^\s*(\d+) uncaught exceptions?/gm) + count(/^\s*(\d+) unhandled rejections?/gm);
  const skipped = count(/^\s*(\d+) tests? skipped/gm) + count(/^\s*(\d+) tests? todo/gm);
  const exit = code ?? (signal ? 1 : 0);
  // A run that failed without a failed test counted (a crash, a timeout) still reports a failure.
  const reportedFailed = exit !== 0 && failed === 0 ? 1 : failed;
  console.log(`${passed} passed, ${reportedFailed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  process.exit(exit);
});
