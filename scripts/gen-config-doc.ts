/** Writes docs/configuration.md from the settings table of shared/config.ts (`npm run docs:config`). */
import { writeFileSync } from 'node:fs';
import { SETTINGS, loadConfig } from '../shared/config.js';

export function renderConfigDoc(): string {
  const defaults = loadConfig({}) as unknown as Record<string, unknown>;
  const rows = Object.entries(SETTINGS).map(([key, spec]) => {
    const s = spec as { env: string; doc: string; secret?: boolean; enum?: readonly string[] };
    const d = s.secret ? '(none)' : JSON.stringify(defaults[key]);
    const values = s.enum ? ` One of: ${s.enum.map((v) => `\`${v}\``).join(', ')}.` : '';
    return `| \`${s.env}\` | \`${d}\` | ${s.doc}${values} |`;
  });
  return [
    '# Configuration',
    '',
    'Generated from `shared/config.ts` by `npm run docs:config`; every process reads the same settings, validated at start-up',
    '(an invalid value stops the process with a list of every problem). `NODE_ENV=production` refuses the development',
    'signing key, the SMS outbox and the registry fault injection.',
    '',
    '| variable | default | meaning |',
    '|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(new URL('../docs/configuration.md', import.meta.url), renderConfigDoc());
  console.log('docs/configuration.md written');
}
