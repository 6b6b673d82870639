/**
 * The processes of the service, written once: the launcher (platform/processes/launcher.ts) runs them
 * under its supervisor for `npm start` (scripts/start.ts) and `npm run start:ha` (scripts/start-ha.ts),
 * the Procfile (for foreman, honcho, a PaaS) lists them, and `npm run start:<name>` runs one.
 * test/process-list.test.ts checks the Procfile and package.json against this list.
 */
import type { Config } from '../config.js';

export interface ServiceProcess {
  name: string;
  /** The entry file, from the repository root. */
  file: string;
  /** What it does. */
  role: string;
  /** How many copies `npm start` runs (default 1). */
  copies?: (c: Config) => number;
  /** Settings of copy `index` alone, besides its port (a search copy's shard). */
  copyEnv?: (c: Config, index: number) => Record<string, string>;
  /**
   * The setting of the port its first copy answers `/health` on (the API watches it); the other
   * copies get 0 (a free port each).
   */
  healthPortEnv?: string;
  /**
   * Stopped first, alone: it drains the requests in flight, which may still hand jobs to the others
   * (the workers stop once it is gone).
   */
  drainsFirst?: boolean;
}

/** In start order; `npm start` stops web first (it drains its in-flight requests), then the workers. */
export const SERVICE_PROCESSES: readonly ServiceProcess[] = [
  { name: 'web', file: 'processes/web.ts', role: 'the API, the consoles and the registry simulator', drainsFirst: true },
  {
    name: 'face',
    file: 'processes/face.ts',
    role: 'the face worker (liveness and embed queues)',
    copies: (c) => c.face.processes,
    healthPortEnv: 'FACE_ENGINE_PORT',
  },
  {
    name: 'search',
    file: 'processes/search.ts',
    role: 'a search replica (search queue), or a replica of one shard (SEARCH_SHARDS > 1)',
    // With shards, one process per shard (SEARCH_SHARD = the copy's index modulo the shard count: a
    // layout that runs 2 × SEARCH_SHARDS copies runs two replicas of every shard).
    copies: (c) => (c.search.shards > 1 ? c.search.shards : c.search.processes),
    copyEnv: (c, index): Record<string, string> => (c.search.shards > 1 ? { SEARCH_SHARD: String(index % c.search.shards) } : {}),
    healthPortEnv: 'SEARCH_HEALTH_PORT',
  },
];

/** One running copy of a process of the list, as a layout starts it. */
export interface ProcessCopy {
  /** `web`, `face`, `face-2`, ...: the first copy has the process's name, the others a number. */
  name: string;
  process: ServiceProcess;
  /** Which copy (0: the first). */
  index: number;
  /** The settings of this copy alone (its ports), over the layout's shared environment. */
  env: Record<string, string>;
}

/**
 * The copies a layout runs, in the list's order: `copies(p)` of each process, each with the settings
 * `env(p, index)` gives it.
 */
export function processCopies(
  copies: (p: ServiceProcess) => number,
  env: (p: ServiceProcess, index: number) => Record<string, string> = () => ({}),
): ProcessCopy[] {
  return SERVICE_PROCESSES.flatMap((p) =>
    Array.from({ length: copies(p) }, (_, index) => ({ name: index === 0 ? p.name : `${p.name}-${index + 1}`, process: p, index, env: env(p, index) })),
  );
}

/**
 * Runs once before the processes start, to completion (the Procfile's `release`, and the launcher's
 * first step). Not `npm run migrate`: that script says NODE_ENV=development when NODE_ENV is unset, so a
 * release would skip production's refusals; like the processes, the release runs in production unless
 * told otherwise.
 */
export const RELEASE = { file: 'scripts/migrate.ts', args: ['latest'] } as const;
export const RELEASE_COMMAND = `exec node --import tsx ${RELEASE.file} ${RELEASE.args.join(' ')}`;

/** The Procfile these processes make: `release`, then `<name>: exec node --import tsx <file>` each. */
export function procfileText(): string {
  return ['release: ' + RELEASE_COMMAND, ...SERVICE_PROCESSES.map((p) => `${p.name}: exec node --import tsx ${p.file}`)].join('\n') + '\n';
}
