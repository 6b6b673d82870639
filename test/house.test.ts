/**
 * The house as docs/architecture.md draws it, read off the product code's imports: no import circle,
 * no import climbing back up (models → platform → features → processes), wings that use each other in
 * one direction only, and a README in every wing. And off the wings' manifests (platform/wing.ts): each
 * wing composed by processes/wings.ts, every table owned once, no wing naming another's table unless
 * its manifest says why.
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

/** The floor's modules named in a wing's Uses paragraph ("Floor: `platform/config`, ..."), before "Public entry". */
function floorNamedInUses(readme: string): string[] | null {
  const paragraph = /^Uses[\s\S]*?(?=\n\s*\n|(?![\s\S]))/m.exec(readme)?.[0];
  if (!paragraph || !/\bFloor:/.test(paragraph)) return null;
  const declared = paragraph.split(/Public entry/)[0]!;
  return [...new Set([...declared.matchAll(/`platform\/([a-z-]+)`/g)].map((m) => m[1]!))].sort();
}

test("each wing's README names, in its Uses paragraph, exactly the floor's modules its code imports", (t) => {
  const wings = WING_NAMES();
  const imported = new Map<string, Set<string>>(wings.map((w) => [w, new Set<string>()]));
  for (const [from, targets] of importGraph()) {
    const a = wingOf(from);
    // The manifest is the house's wiring (platform/wing.ts), not what the wing's code uses.
    if (!a || from.endsWith('/manifest.ts')) continue;
    for (const to of targets) if (to.startsWith('platform/')) imported.get(a)!.add(to.split('/')[1]!.replace(/\.tsx?$/, ''));
  }
  const wrong: string[] = [];
  for (const wing of wings) {
    const named = floorNamedInUses(readFileSync(path.join(ROOT, 'features', wing, 'README.md'), 'utf8'));
    const actual = [...imported.get(wing)!].sort();
    if (named === null) wrong.push(`${wing}: no "Floor:" line in its Uses paragraph (imports: ${actual.join(', ') || 'none'})`);
    else if (named.join() !== actual.join()) wrong.push(`${wing}: README names [${named.join(', ')}], code imports [${actual.join(', ')}]`);
  }
  t.deepEqual(wrong, []);
  t.deepEqual(floorNamedInUses('Uses: `users`. Floor: `platform/config`, `platform/http`.\nPublic entry: `platform/keys`.'), ['config', 'http']);
});

// ---- manifests: every wing registers itself, owns its tables, names no other's undeclared ----

const WING_NAMES = () => readdirSync(path.join(ROOT, 'features')).filter((w) => statSync(path.join(ROOT, 'features', w)).isDirectory());
const camelCase = (table: string) => table.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
/** Comments out of a source: prose may say "from users" without naming the table. */
const withoutComments = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');

/** The Objection models' tables (models/), by class name. */
function modelTables(): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of sourceFiles('models')) {
    for (const m of readFileSync(path.join(ROOT, file), 'utf8').matchAll(/class (\w+) extends \w+ \{\s*static override tableName = '(\w+)'/g))
      out.set(m[1]!, m[2]!);
  }
  return out;
}

/**
 * The tables a source names: a knex call or an assignment with the table as a string literal
 * (`db('users as u')`, `.join('ninLinks as n', ...)`, `const CASES = 'dedupeCases'`; snake_case or the
 * camelCase the snake-case mappers accept), SQL text (`FROM t`, `JOIN t`, `INTO t`, `UPDATE t`,
 * `TABLE t`), or an Objection model of the table (`User.query(`, `User.tableName`).
 */
function tablesNamed(source: string, tables: readonly string[], models: Map<string, string>): Set<string> {
  const byName = new Map(tables.flatMap((t) => [[t, t] as const, [camelCase(t), t] as const]));
  const names = [...byName.keys()].sort((a, b) => b.length - a.length).join('|');
  const text = withoutComments(source);
  const found = new Set<string>();
  for (const m of text.matchAll(new RegExp(`(?:\\(|=)\\s*['"\`](${names})(?:\\s+as\\s+\\w+)?['"\`]`, 'g'))) found.add(byName.get(m[1]!)!);
  for (const m of text.matchAll(new RegExp(`\\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\\s+(?:ONLY\\s+)?(?:"?public"?\\.)?"?(${names})\\b`, 'gi')))
    found.add(byName.get(m[1]!)!);
  const modelNames = [...models.keys()].filter((c) => tables.includes(models.get(c)!));
  if (modelNames.length) {
    for (const m of text.matchAll(new RegExp(`\\b(${modelNames.join('|')})\\.(?:query|tableName|relatedQuery)\\b`, 'g'))) found.add(models.get(m[1]!)!);
  }
  return found;
}

test('the table detector finds knex, SQL and model names, and not prose or a setting group', (t) => {
  const models = new Map([['User', 'users']]);
  const tables = ['users', 'dedupe_cases', 'operators'];
  t.deepEqual([...tablesNamed("db('users as u').where(1)", tables, models)], ['users']);
  t.deepEqual([...tablesNamed("const CASES = 'dedupeCases';", tables, models)], ['dedupe_cases']);
  t.deepEqual([...tablesNamed('db.raw(`SELECT 1 FROM users u JOIN operators o ON true`)', tables, models)].sort(), ['operators', 'users']);
  t.deepEqual([...tablesNamed('User.query(trx).findById(id)', tables, models)], ['users']);
  t.deepEqual([...tablesNamed('db.raw(\'DELETE FROM "public"."users" WHERE id = ?\', [id])', tables, models)], ['users']);
  t.deepEqual([...tablesNamed('trx.raw(`UPDATE public.operators SET x = 1`)', tables, models)], ['operators']);
  t.deepEqual([...tablesNamed("// removes the rows from users\nconfig: Pick<Config, 'operators'>", tables, models)], []);
});

async function migratedTables(): Promise<string[]> {
  const { createTestDatabase } = await import('./helpers/db.js');
  const { default: knex } = await import('knex');
  const database = await createTestDatabase();
  const db = knex({ client: 'pg', connection: database.url });
  try {
    const rows = await db('information_schema.tables')
      .where({ table_schema: 'public', table_type: 'BASE TABLE' })
      .whereNotIn('table_name', ['knex_migrations', 'knex_migrations_lock'])
      .select('table_name');
    return rows.map((r: { table_name: string }) => r.table_name).sort();
  } finally {
    await db.destroy();
    await database.drop();
  }
}

test('every wing has a manifest, and processes/wings.ts composes each of them once', async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  t.deepEqual(
    WING_NAMES().filter((w) => !existsSync(path.join(ROOT, 'features', w, 'manifest.ts'))),
    [],
  );
  t.deepEqual(WINGS.map((w) => w.name).sort(), WING_NAMES().sort());
});

test("each wing's routes come from its manifest: every route module of a wing is loaded there, and the web process names no wing", async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const missing: string[] = [];
  for (const wing of WINGS) {
    const manifest = readFileSync(path.join(ROOT, 'features', wing.name, 'manifest.ts'), 'utf8');
    for (const f of sourceFiles(`features/${wing.name}`).filter((f) => /(^|-)routes\.ts$/.test(path.basename(f)))) {
      if (!manifest.includes(`import('./${path.basename(f, '.ts')}.js')`)) missing.push(f);
    }
    if (/\broutes:/.test(manifest) !== Boolean(wing.routes)) missing.push(`${wing.name}: manifest`);
  }
  t.deepEqual(missing, []);
  const web = readFileSync(path.join(ROOT, 'processes', 'web', 'routes.ts'), 'utf8');
  t.notRegex(web, /from '[./]+features\//, 'processes/web/routes.ts composes the manifests, not the wings one by one');
  // No process but the web process loads a route module: the manifests import them only on demand.
  for (const wing of WINGS) t.notRegex(readFileSync(path.join(ROOT, 'features', wing.name, 'manifest.ts'), 'utf8'), /^import .*routes\.js'/m, wing.name);
});

test("each wing's workers come from its manifest: every worker entry of a wing is loaded there by its role, and no process names a wing's worker", async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const missing: string[] = [];
  for (const wing of WINGS) {
    const manifest = readFileSync(path.join(ROOT, 'features', wing.name, 'manifest.ts'), 'utf8');
    const entry = existsSync(path.join(ROOT, 'features', wing.name, 'worker', 'worker.ts'));
    if (entry !== manifest.includes("import('./worker/worker.js')"))
      missing.push(`${wing.name}: worker/worker.ts ${entry ? 'not loaded by' : 'absent but named in'} the manifest`);
    if (entry !== Boolean(wing.workers && Object.keys(wing.workers).length)) missing.push(`${wing.name}: manifest's workers`);
    // Loaded on demand only: a web process never loads a model, a face process never a webhook sender.
    if (/^import .*worker\//m.test(manifest)) missing.push(`${wing.name}: imports its worker side statically`);
  }
  t.deepEqual(missing, []);
  const named = sourceFiles('processes').filter((f) => /from '[./]+features\/[^/']+\/worker\//.test(readFileSync(path.join(ROOT, f), 'utf8')));
  t.deepEqual(named, [], 'processes start workers by role (processes/wing-workers.ts), not wing by wing');
  // Every role a process runs has its wing: the face and search processes are not empty shells.
  for (const role of ['face', 'search', 'background'] as const)
    t.true(
      WINGS.some((w) => w.workers?.[role]),
      role,
    );
});

test("each wing's setting groups are the ones its settings.ts types into Config, and no group is the floor's", async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const { SETTINGS, settingGroups } = await import('../processes/config.js');
  const wrong: string[] = [];
  for (const wing of WINGS) {
    const file = path.join(ROOT, 'features', wing.name, 'settings.ts');
    const typed = existsSync(file) ? /interface WingSettings \{([^}]*)\}/.exec(readFileSync(file, 'utf8'))?.[1] : undefined;
    const typedGroups = [...(typed ?? '').matchAll(/^\s*(\w+):/gm)].map((m) => m[1]!).sort();
    const registered = Object.keys(wing.settings ?? {}).sort();
    if (typedGroups.join() !== registered.join()) wrong.push(`${wing.name}: typed [${typedGroups.join(', ')}], registered [${registered.join(', ')}]`);
    for (const group of registered) if (group in SETTINGS) wrong.push(`${wing.name}: group ${group} is also the floor's`);
  }
  t.deepEqual(wrong, []);
  // The composed table holds each wing's groups, after the floor's.
  const composed = settingGroups();
  t.deepEqual(
    composed.filter((g) => g.wing !== undefined).map((g) => g.group),
    WINGS.flatMap((w) => Object.keys(w.settings ?? {})),
  );
  // One environment variable, one setting, across the floor and the wings.
  const envs = composed.flatMap((g) => Object.values(g.settings).map((spec) => spec.env));
  t.deepEqual(
    envs.filter((env, i) => envs.indexOf(env) !== i),
    [],
  );
});

test('every table the migrations create has exactly one owner: the floor or one wing', async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const { FLOOR_TABLES } = await import('../platform/wing.js');
  const owners = new Map<string, string[]>();
  for (const [owner, tables] of [['platform', FLOOR_TABLES] as const, ...WINGS.map((w) => [w.name, w.tables] as const)]) {
    for (const table of tables) owners.set(table, [...(owners.get(table) ?? []), owner]);
  }
  const migrated = await migratedTables();
  t.true(migrated.length >= 20);
  t.deepEqual(
    migrated.filter((table) => (owners.get(table) ?? []).length !== 1).map((table) => `${table}: ${(owners.get(table) ?? ['no owner']).join(', ')}`),
    [],
  );
  t.deepEqual(
    [...owners.keys()].filter((table) => !migrated.includes(table)),
    [],
    'a manifest names a table no migration creates',
  );
});

test("no wing's code (nor the floor's) names another's table unless its manifest declares the read, with a reason", async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const { FLOOR_READS, FLOOR_TABLES } = await import('../platform/wing.js');
  const models = modelTables();
  const allTables = [...FLOOR_TABLES, ...WINGS.flatMap((w) => w.tables)];
  const owners = [
    { name: 'platform', folder: 'platform', tables: FLOOR_TABLES as readonly string[], reads: FLOOR_READS },
    ...WINGS.map((w) => ({ name: w.name, folder: `features/${w.name}`, tables: w.tables, reads: w.reads ?? [] })),
  ];
  const undeclared: string[] = [];
  const unused: string[] = [];
  for (const owner of owners) {
    const declared = new Map(owner.reads.map((r) => [r.table, r.reason]));
    const named = new Set<string>();
    for (const file of sourceFiles(owner.folder).filter((f) => !f.endsWith('/manifest.ts'))) {
      for (const table of tablesNamed(readFileSync(path.join(ROOT, file), 'utf8'), allTables, models)) {
        named.add(table);
        if (!owner.tables.includes(table) && !declared.get(table)?.trim()) undeclared.push(`${file} names ${table}`);
      }
    }
    for (const table of declared.keys()) if (!named.has(table)) unused.push(`${owner.name} declares a read of ${table} its code does not make`);
  }
  t.deepEqual(undeclared, []);
  t.deepEqual(unused, []);
});

test('scripts, benches, chaos and tests read the configuration through processes/config.ts (with the wings)', (t) => {
  const wrong = ['scripts', 'bench', 'chaos', 'test'].flatMap((dir) =>
    sourceFiles(dir).filter((file) =>
      /import\s*\{[^}]*\b(loadConfig|config|eachSetting|describeConfig|settingGroups)\b[^}]*\}\s*from\s*['"][./]+platform\/config\.js['"]/.test(
        readFileSync(path.join(ROOT, file), 'utf8'),
      ),
    ),
  );
  t.deepEqual(wrong, []);
});

test("each wing's key purposes are the ones its manifest types into KeyPurposes, none declared twice, and a wing seals only under its own or the floor's", async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const { FLOOR_KEY_PURPOSES } = await import('../platform/keys/key-ring.js');
  const wrong: string[] = [];
  const owner = new Map<string, string>(Object.keys(FLOOR_KEY_PURPOSES).map((p) => [p, 'platform']));
  for (const wing of WINGS) {
    const manifest = readFileSync(path.join(ROOT, 'features', wing.name, 'manifest.ts'), 'utf8');
    const typed = /interface KeyPurposes \{([^}]*)\}/.exec(manifest)?.[1] ?? '';
    const typedPurposes = [...typed.matchAll(/^\s*'?([\w-]+)'?:/gm)].map((m) => m[1]!).sort();
    const listed = Object.keys(wing.keyPurposes ?? {}).sort();
    if (typedPurposes.join() !== listed.join()) wrong.push(`${wing.name}: typed [${typedPurposes.join(', ')}], listed [${listed.join(', ')}]`);
    for (const purpose of listed) {
      if (owner.has(purpose)) wrong.push(`${purpose}: declared by ${owner.get(purpose)} and ${wing.name}`);
      else owner.set(purpose, wing.name);
    }
  }
  // A purpose named in a wing's code (seal, open, saltedKey, a family's `purpose`) is its own or the floor's.
  const purposes = [...owner.keys()].sort((a, b) => b.length - a.length);
  let seen = 0;
  const named = new RegExp(
    `(?:seal|open|sealText|openText|saltedKey|needsRotation)\\(\\s*'(${purposes.join('|')})'|purpose:\\s*'(${purposes.join('|')})'`,
    'g',
  );
  for (const wing of WINGS) {
    for (const file of sourceFiles(`features/${wing.name}`).filter((f) => !f.endsWith('/manifest.ts'))) {
      for (const m of withoutComments(readFileSync(path.join(ROOT, file), 'utf8')).matchAll(named)) {
        const purpose = (m[1] ?? m[2])!;
        seen++;
        if (owner.get(purpose) !== 'platform' && owner.get(purpose) !== wing.name) wrong.push(`${file} seals under ${purpose}, ${owner.get(purpose)}'s`);
      }
    }
  }
  t.deepEqual(wrong, []);
  t.true(owner.size >= 9);
  t.true(seen >= 20, `the purpose detector found ${seen} uses only`);
});

test('every sealed family a wing lists is declared to the key rotation once, and no wing declares one outside its manifest', async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const { sealedFamilies } = await import('../platform/keys/sealed-families.js');
  const listed = WINGS.flatMap((w) => (w.sealedFamilies ?? []).map((f) => f.name));
  t.deepEqual(
    sealedFamilies().map((f) => f.name),
    listed,
  );
  t.true(listed.length >= 5);
  t.deepEqual(
    sourceFiles('features').filter((f) => /\bdeclareSealedFamily\(/.test(readFileSync(path.join(ROOT, f), 'utf8'))),
    [],
  );
});

test("each wing's metrics are its own: no name declared twice, none of them created by the floor's platform/metrics.ts", async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const names = WINGS.flatMap((w) => (w.metrics ?? []).map((m) => m.name));
  t.true(names.length >= 5);
  t.deepEqual(
    names.filter((n, i) => names.indexOf(n) !== i),
    [],
  );
  const floor = readFileSync(path.join(ROOT, 'platform/metrics.ts'), 'utf8');
  t.deepEqual(
    names.filter((n) => floor.includes(`'${n}'`)),
    [],
  );
});

test("the composed queues are the floor's and each wing's manifest jobs, each once; no wing declares a queue its manifest does not list", async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const { QUEUE_NAMES, JOB_CONTRACTS } = await import('../platform/jobs/index.js');
  const wingQueues = WINGS.flatMap((w) => (w.jobs ?? []).map((j) => j.queue));
  t.deepEqual(QUEUE_NAMES.slice(-wingQueues.length), wingQueues);
  t.deepEqual(
    QUEUE_NAMES.filter((q, i) => QUEUE_NAMES.indexOf(q) !== i),
    [],
  );
  for (const q of wingQueues) t.is((JOB_CONTRACTS as Record<string, { delivery: string }>)[q]!.delivery, 'deferred', q);
  const unlisted = WINGS.filter(
    (w) =>
      sourceFiles(`features/${w.name}`).reduce(
        (n, f) => n + (readFileSync(path.join(ROOT, f), 'utf8').match(/\b(?:deferred|awaited)JobContract\s*</g)?.length ?? 0),
        0,
      ) !== (w.jobs ?? []).length,
  ).map((w) => w.name);
  t.deepEqual(unlisted, []);
  t.true(wingQueues.includes('webhooks'));
});

test("the floor's code reads a wing's setting only where platform/wing.ts declares it, with the reason", async (t) => {
  const { WINGS } = await import('../processes/wings.js');
  const { FLOOR_SETTING_READS } = await import('../platform/wing.js');
  const groups = WINGS.flatMap((w) => Object.keys(w.settings ?? {}));
  const read = new RegExp(`\\b(?:c|cfg|config|\\w*[cC]onfig(?:\\(\\))?)\\.(${groups.join('|')})\\.(\\w+)`, 'g');
  t.true(read.test('copies: (c) => c.face.processes'));
  read.lastIndex = 0;
  const named = new Set<string>();
  for (const file of sourceFiles('platform')) {
    for (const m of withoutComments(readFileSync(path.join(ROOT, file), 'utf8')).matchAll(read)) named.add(`${m[1]}.${m[2]}`);
  }
  const declared = new Map(FLOOR_SETTING_READS.map((r) => [r.setting, r.reason]));
  t.deepEqual(
    [...named].filter((s) => !declared.get(s)?.trim()),
    [],
  );
  t.deepEqual(
    [...declared.keys()].filter((s) => !named.has(s)),
    [],
    'a declared read the floor no longer makes',
  );
});
