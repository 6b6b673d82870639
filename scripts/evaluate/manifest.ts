/**
 * What an evaluation compares: labelled pairs of images, read from a manifest file or from a folder
 * laid out one sub-folder per person (docs/evaluation.md, "Your own data").
 *
 * Manifest (CSV, UTF-8, a header line, `#` comments): `a,b,label[,group]`
 *   a, b    image paths, relative to the manifest's folder (or absolute)
 *   label   `same` or `different` (also accepted: genuine/impostor, mated/nonmated, 1/0)
 *   group   optional: a demographic or capture group (sex, age band, device...) reported on its own
 *
 * Folder: DIR/<person>/<image>; every two images of one person are a `same` pair, every two images of
 * different people a `different` pair. An optional DIR/groups.csv (`person,group`) puts people in
 * groups; a `different` pair belongs to a group when both people do (NIST's demographic analyses
 * compare impostors within one group: across groups false matches are rarer and would flatter it).
 */
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import path from 'node:path';

export interface LabelledPair {
  a: string;
  b: string;
  same: boolean;
  group?: string;
}

const SAME = new Set(['same', 'genuine', 'mated', '1', 'true']);
const DIFFERENT = new Set(['different', 'impostor', 'nonmated', 'non-mated', '0', 'false']);
const IMAGE = /\.(jpe?g|png|webp)$/i;

export class ManifestError extends Error {}

function splitCsvLine(line: string): string[] {
  const out: string[] = [];
  let cur = '',
    quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      out.push(cur.trim());
      cur = '';
    } else cur += c;
  }
  out.push(cur.trim());
  return out;
}

export function readManifest(file: string): LabelledPair[] {
  const dir = path.dirname(path.resolve(file));
  const lines = readFileSync(file, 'utf8')
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const header = splitCsvLine(lines.shift() ?? '').map((h) => h.toLowerCase());
  const col = (name: string) => header.indexOf(name);
  if (col('a') < 0 || col('b') < 0 || col('label') < 0) throw new ManifestError(`${file}: the header must name the columns a,b,label[,group]`);
  return lines.map((line, i) => {
    const cells = splitCsvLine(line);
    const label = (cells[col('label')] ?? '').toLowerCase();
    if (!SAME.has(label) && !DIFFERENT.has(label)) throw new ManifestError(`${file}:${i + 2}: label must be same or different, not "${label}"`);
    const [a, b] = [cells[col('a')], cells[col('b')]];
    if (!a || !b) throw new ManifestError(`${file}:${i + 2}: both images are required`);
    const group = col('group') >= 0 ? cells[col('group')] || undefined : undefined;
    return { a: path.resolve(dir, a), b: path.resolve(dir, b), same: SAME.has(label), group };
  });
}

export function pairsFromFolder(root: string): LabelledPair[] {
  const people = readdirSync(root)
    .filter((p) => statSync(path.join(root, p)).isDirectory())
    .sort();
  const groups = new Map<string, string>();
  const groupsFile = path.join(root, 'groups.csv');
  if (existsSync(groupsFile)) {
    for (const line of readFileSync(groupsFile, 'utf8').split(/\r?\n/).slice(1)) {
      const [person, group] = splitCsvLine(line);
      if (person && group) groups.set(person, group);
    }
  }
  const images = people.flatMap((p) =>
    readdirSync(path.join(root, p))
      .filter((f) => IMAGE.test(f))
      .sort()
      .map((f) => ({ person: p, file: path.join(root, p, f) })),
  );
  const pairs: LabelledPair[] = [];
  for (let i = 0; i < images.length; i++) {
    for (let j = i + 1; j < images.length; j++) {
      const x = images[i]!,
        y = images[j]!;
      const same = x.person === y.person;
      const gx = groups.get(x.person),
        gy = groups.get(y.person);
      pairs.push({ a: x.file, b: y.file, same, group: gx && gx === gy ? gx : undefined });
    }
  }
  return pairs;
}
