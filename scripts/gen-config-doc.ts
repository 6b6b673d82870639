/** Writes docs/configuration.md from the settings table of shared/config.ts (`npm run docs:config`). */
import { writeFileSync } from 'node:fs';
import { SETTINGS, loadConfig } from '../shared/config.js';

export function renderConfigDoc(): string {
  // Defaults as a developer sees them (NODE_ENV=development, what `npm start` sets); NODE_ENV's own row
  // shows its real default, production.
  const defaults: Record<string, unknown> = { ...(loadConfig({ NODE_ENV: 'development' }) as unknown as Record<string, unknown>), nodeEnv: SETTINGS.nodeEnv.default };
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
    '(an invalid value stops the process with a list of every problem). `NODE_ENV=production` (also when NODE_ENV is unset) refuses the development',
    'signing key, the SMS outbox, the registry simulator and the registry fault injection. The defaults below are those of',
    '`NODE_ENV=development`, which `npm start`, `npm test` and the developer scripts set when NODE_ENV is not given; settings',
    'whose default depends on the mode (SMS_TRANSPORT, REGISTRY_SIMULATOR, STAFF_MFA) say so.',
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
