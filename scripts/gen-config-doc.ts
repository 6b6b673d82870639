/** Writes docs/configuration.md from the settings table of platform/config.ts (`npm run docs:config`). */
import { writeFileSync } from 'node:fs';
import { GROUP_TITLES, SETTINGS, eachSetting, loadConfig } from '../platform/config.js';

export function renderConfigDoc(): string {
  // Defaults as a developer sees them (NODE_ENV=development, what `npm start` sets); NODE_ENV's own row
  // shows its real default, production.
  const developmentDefaults = loadConfig({ NODE_ENV: 'development' });
  const defaults = { ...developmentDefaults, runtime: { ...developmentDefaults.runtime, nodeEnv: SETTINGS.runtime.nodeEnv.default } };
  const sections = (Object.keys(GROUP_TITLES) as (keyof typeof GROUP_TITLES)[]).flatMap((group) => {
    const rows = eachSetting()
      .filter((s) => s.group === group)
      .map(({ key, spec }) => {
        const d = spec.secret ? '(none)' : JSON.stringify((defaults[group] as Record<string, unknown>)[key]);
        const values = spec.enum ? ` One of: ${spec.enum.map((v) => `\`${v}\``).join(', ')}.` : '';
        return `| \`${spec.env}\` | \`config.${group}.${key}\` | \`${d}\` | ${spec.doc}${values} |`;
      });
    return [`## ${GROUP_TITLES[group]} (\`config.${group}\`)`, '', '| variable | in code | default | meaning |', '|---|---|---|---|', ...rows, ''];
  });
  return [
    '# Configuration',
    '',
    'Generated from `platform/config.ts` by `npm run docs:config`; every process reads the same settings, validated at start-up',
    '(an invalid value stops the process with a list of every problem). `NODE_ENV=production` (also when NODE_ENV is unset) refuses the development',
    'signing key, the SMS outbox, the registry simulator and the registry fault injection. The defaults below are those of',
    '`NODE_ENV=development`, which `npm start`, `npm test` and the developer scripts set when NODE_ENV is not given; settings',
    'whose default depends on the mode (SMS_TRANSPORT, REGISTRY_SIMULATOR, STAFF_MFA) say so. In code the settings are read by',
    'group: `config.redis.url`, `config.face.processes`; nothing else reads the environment.',
    '',
    ...sections,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(new URL('../docs/configuration.md', import.meta.url), renderConfigDoc());
  console.log('docs/configuration.md written');
}
