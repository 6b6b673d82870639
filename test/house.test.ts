/**
 * The house as docs/architecture.md draws it, read off the product code's imports: no import circle,
 * no import climbing back up (models → platform → features → processes), wings that use each other in
 * one direction only, and a README in every wing.
 */
import test from 'ava';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const LAYERS = ['models', 'platform', 'features', 'processes'] as const;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(path.join(ROOT, dir))) {
    const rel = `${dir}/${name}`;
    if (statSync(path.join(ROOT, rel)).isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.tsx?$/.test(name) && !name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

const SPECIFIER = /(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** file → the product files it imports (type-only imports included: they tie the modules too). */
function importGraph(): Map<string, string[]> {
  const files = LAYERS.flatMap((l) => sourceFiles(l));
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets: string[] = [];
    for (const [, spec] of readFileSync(path.join(ROOT, file), 'utf8').matchAll(SPECIFIER)) {
      const joined = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec!));
      const target = [joined.replace(/\.js$/, '.ts'), joined.replace(/\.js$/, '.tsx'), joined].find((c) => known.has(c));
      if (target) targets.push(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Strongly connected components of more than one node (Tarjan), i.e. the import circles. */
function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) found.push(component);
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

const layerOf = (file: string) => LAYERS.indexOf(file.split('/')[0] as (typeof LAYERS)[number]);
const wingOf = (file: string) => (file.startsWith('features/') ? file.split('/')[1]! : null);

test('no import circle in the product code', (t) => {
  t.deepEqual(circles(importGraph()), []);
});

test('no import climbs back up: models, then the floor, then the wings, then the processes', (t) => {
  const climbing = [...importGraph()].flatMap(([from, targets]) => targets.filter((to) => layerOf(to) > layerOf(from)).map((to) => `${from} -> ${to}`));
  t.deepEqual(climbing, []);
});

test('wings use each other in one direction only, and only through their index.ts', (t) => {
  const wingGraph = new Map<string, string[]>();
  const throughInside: string[] = [];
  for (const [from, targets] of importGraph()) {
    const a = wingOf(from);
    if (!a) continue;
    for (const to of targets) {
      const b = wingOf(to);
      if (!b || b === a) continue;
      wingGraph.set(a, [...(wingGraph.get(a) ?? []), b]);
      if (to !== `features/${b}/index.ts`) throughInside.push(`${from} -> ${to}`);
    }
  }
  t.deepEqual(throughInside, []);
  t.deepEqual(circles(wingGraph), []);
});

test('every wing has a README', (t) => {
  const wings = readdirSync(path.join(ROOT, 'features')).filter((w) => statSync(path.join(ROOT, 'features', w)).isDirectory());
  t.true(wings.length >= 10);
  t.deepEqual(
    wings.filter((w) => !existsSync(path.join(ROOT, 'features', w, 'README.md'))),
    [],
  );
});

/**
 * A wing's README says what it uses in one paragraph, "Uses: `a`, `b` ..." or "Uses the floor only";
 * the wings named there (up to "Public entry") are exactly the wings its code imports.
 */
function wingsNamedInUses(readme: string, wings: Set<string>): string[] | null {
  const paragraph = /^Uses[\s\S]*?(?=\n\s*\n|(?![\s\S]))/m.exec(readme)?.[0];
  if (!paragraph) return null;
  const declared = paragraph.split(/Public entry/)[0]!;
  return [...new Set([...declared.matchAll(/`([a-z-]+)`/g)].map((m) => m[1]!).filter((name) => wings.has(name)))].sort();
}

test("each wing's README names, in its Uses paragraph, exactly the wings its code imports", (t) => {
  const wings = new Set(readdirSync(path.join(ROOT, 'features')).filter((w) => statSync(path.join(ROOT, 'features', w)).isDirectory()));
  const imported = new Map<string, Set<string>>([...wings].map((w) => [w, new Set<string>()]));
  for (const [from, targets] of importGraph()) {
    const a = wingOf(from);
    if (!a) continue;
    for (const to of targets) {
      const b = wingOf(to);
      if (b && b !== a) imported.get(a)!.add(b);
    }
  }
  const wrong: string[] = [];
  for (const wing of wings) {
    const named = wingsNamedInUses(readFileSync(path.join(ROOT, 'features', wing, 'README.md'), 'utf8'), wings);
    const actual = [...imported.get(wing)!].sort();
    if (named === null) wrong.push(`${wing}: no "Uses" paragraph (imports: ${actual.join(', ') || 'none'})`);
    else if (named.join() !== actual.join()) wrong.push(`${wing}: README names [${named.join(', ')}], code imports [${actual.join(', ')}]`);
  }
  t.deepEqual(wrong, []);
});
