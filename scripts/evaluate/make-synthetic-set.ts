/**
 * Writes a synthetic evaluation set from the project's labelled photos: each photo and eight
 * capture-like variants of it (mirror, small rotations, darker, brighter, blur, heavy JPEG, a tighter
 * crop), and a manifest whose same-person pairs join variants of DIFFERENT photographs of one person
 * (variants of one photograph would flatter the false non-match rate) and whose different-person pairs
 * join every two people. It grows the number of comparisons, not the number of people: the pairs are
 * correlated, so its bounds are optimistic (docs/evaluation.md).
 *
 *   npx tsx scripts/evaluate/make-synthetic-set.ts [OUT_DIR]      # default var/eval/synthetic
 *   npm run evaluate -- --pairs var/eval/synthetic/pairs.csv
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp, { type Sharp } from 'sharp';
import { FIXTURE_PHOTOS, FIXTURES_DIR } from '../../test/fixtures/faces/labels.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Sex of each labelled person, the only group the project's photos allow. */
const SEX: Record<string, string> = { Bush: 'M', Chavez: 'M', Powell: 'M', Sharon: 'M', Hopper: 'F', Collins: 'F' };

const VARIANTS: Record<string, (img: Sharp, w: number, h: number) => Sharp> = {
  original: (img) => img,
  mirror: (img) => img.flop(),
  'rotate-7': (img) => img.rotate(-7, { background: '#808080' }),
  'rotate+7': (img) => img.rotate(7, { background: '#808080' }),
  darker: (img) => img.modulate({ brightness: 0.7 }),
  brighter: (img) => img.modulate({ brightness: 1.3 }),
  blur: (img) => img.blur(1.2),
  jpeg35: (img) => img.jpeg({ quality: 35 }),
  crop88: (img, w, h) => img.extract({ left: Math.round(w * 0.06), top: Math.round(h * 0.06), width: Math.round(w * 0.88), height: Math.round(h * 0.88) }),
};

async function main(): Promise<void> {
  const out = path.resolve(ROOT, process.argv[2] ?? 'var/eval/synthetic');
  mkdirSync(out, { recursive: true });
  const images: Array<{ file: string; person: string; photograph: string }> = [];
  for (const photo of FIXTURE_PHOTOS.filter((p) => p.identity)) {
    const buf = readFileSync(path.join(FIXTURES_DIR, photo.file));
    const { width = 0, height = 0 } = await sharp(buf).metadata();
    // Crops of one photograph count as one photograph.
    const photograph = photo.samePhoto ?? photo.file;
    for (const [name, make] of Object.entries(VARIANTS)) {
      const file = `${photo.identity}/${path.basename(photo.file).replace(/\.\w+$/, '')}-${name}.jpg`;
      mkdirSync(path.join(out, photo.identity!), { recursive: true });
      const jpeg = await make(sharp(buf).removeAlpha(), width, height)
        .jpeg({ quality: name === 'jpeg35' ? 35 : 92 })
        .toBuffer();
      writeFileSync(path.join(out, file), jpeg);
      images.push({ file, person: photo.identity!, photograph });
    }
  }
  const rows = ['# Synthetic evaluation set (scripts/evaluate/make-synthetic-set.ts): variants of the project photos', 'a,b,label,group'];
  let same = 0,
    different = 0;
  for (let i = 0; i < images.length; i++) {
    for (let j = i + 1; j < images.length; j++) {
      const a = images[i]!,
        b = images[j]!;
      if (a.person === b.person) {
        if (a.photograph === b.photograph) continue;
        rows.push(`${a.file},${b.file},same,${SEX[a.person]}`);
        same++;
      } else {
        rows.push(`${a.file},${b.file},different,${SEX[a.person] === SEX[b.person] ? SEX[a.person] : ''}`);
        different++;
      }
    }
  }
  writeFileSync(path.join(out, 'pairs.csv'), rows.join('\n') + '\n');
  console.log(`wrote ${images.length} images and ${same} same-person + ${different} different-person pairs to ${path.relative(ROOT, out)}/pairs.csv`);
}

await main();
