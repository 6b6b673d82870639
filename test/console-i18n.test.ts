/** The consumer pages' message files: every language has every English key, with the same {placeholders}. */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers/harness.js';

const DIR = path.join(ROOT, 'console', 'src', 'i18n');
const load = (lang: string) => JSON.parse(readFileSync(path.join(DIR, `${lang}.json`), 'utf8')) as Record<string, string>;
const placeholders = (s: string) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
const en = load('en');
// Keys that stay English on purpose (the product name).
const SHARED = new Set(['app']);

for (const lang of ['ha', 'ig', 'yo', 'pcm']) {
  test(`${lang}.json translates every English key with the same placeholders`, (t) => {
    const other = load(lang);
    const missing = Object.keys(en).filter((k) => !SHARED.has(k) && !(k in other));
    t.deepEqual(missing, [], `${lang}.json lacks keys`);
    t.deepEqual(
      Object.keys(other).filter((k) => !(k in en)),
      [],
      `${lang}.json has keys English does not`,
    );
    for (const [k, v] of Object.entries(other)) {
      t.deepEqual(placeholders(v), placeholders(en[k]!), `${lang}.${k} placeholders`);
      t.true(v.trim().length > 0, `${lang}.${k} is empty`);
    }
    // Translated, not copied: most strings differ from English (Pidgin shares many words, so a lower bar).
    const same = Object.keys(other).filter((k) => other[k] === en[k]).length;
    t.true(same / Object.keys(other).length < (lang === 'pcm' ? 0.5 : 0.1), `${lang}: ${same} strings identical to English`);
  });
}
