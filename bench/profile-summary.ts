/**
 * Summarise a V8 CPU profile (`node --cpu-prof`, as `BENCH_PROFILE_DIR=<dir> npm run bench --
 * face-path` writes for the web, face and search processes): busy time by file or package (self
 * time) and the top functions, optionally within a time window of the profile (seconds from its
 * start), so that start-up is left out. Idle samples are not counted.
 *
 *   npx tsx bench/profile-summary.ts <file.cpuprofile> [fromSeconds] [toSeconds]
 *   npx tsx bench/profile-summary.ts <file.cpuprofile> --timeline     # busy ms per second, to find the window
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, from = '0', to = '1e12'] = process.argv.slice(2);
if (!file) {
  console.error('usage: npx tsx bench/profile-summary.ts <file.cpuprofile> [fromSeconds] [toSeconds] | --timeline');
  process.exit(2);
}
const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const where = (n: ProfileNode) =>
  (n.callFrame.url || '(native)')
    .replace(/^file:\/\/.*?\/(api|shared|workers|bench|scripts)\//, '$1/')
    .replace(/.*node_modules\/(@[^/]+\/[^/]+|[^/]+)\/.*/, 'npm:$1');

let t = 0;
const busyPerSecond: number[] = [];
const self = new Map<number, number>();
for (let i = 0; i < p.samples.length; i++) {
  const dt = p.timeDeltas[i] ?? 0;
  t += dt;
  const node = byId.get(p.samples[i]!)!;
  if (node.callFrame.functionName === '(idle)') continue;
  const s = Math.floor(t / 1e6);
  busyPerSecond[s] = (busyPerSecond[s] ?? 0) + dt;
  if (t / 1e6 < Number(from) || t / 1e6 > Number(to)) continue;
  self.set(node.id, (self.get(node.id) ?? 0) + dt);
}
if (from === '--timeline') {
  console.log(Array.from(busyPerSecond, (us, s) => `${s}s:${Math.round((us ?? 0) / 1000)}`).join(' '));
  process.exit(0);
}
const total = [...self.values()].reduce((a, b) => a + b, 0);
const group = (key: (n: ProfileNode) => string) => {
  const m = new Map<string, number>();
  for (const [id, us] of self) {
    const k = key(byId.get(id)!);
    m.set(k, (m.get(k) ?? 0) + us);
  }
  return [...m].sort((a, b) => b[1] - a[1]);
};
const show = (rows: [string, number][], n: number) =>
  rows
    .slice(0, n)
    .map(([k, us]) => `${((100 * us) / total).toFixed(1).padStart(5)} %  ${(us / 1000).toFixed(0).padStart(6)} ms  ${k}`)
    .join('\n');
console.log(`${file}: ${(total / 1e6).toFixed(2)} s busy in [${from}, ${to}] s`);
console.log(`-- self time by file or package\n${show(group(where), 15)}`);
console.log(
  `-- self time by function\n${show(
    group((n) => `${n.callFrame.functionName || '(anonymous)'} ${where(n)}`),
    25,
  )}`,
);
