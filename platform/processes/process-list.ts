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

/**
 * How many copies of a worker process `npm start` runs, and the settings of each copy: declared by the
 * wing whose settings size that process (its manifest's `processes`), registered when processes/wings.ts
 * composes the wings; one copy where no wing sized it.
 */
export interface ProcessSizing {
  copies: (c: Config) => number;
  /** Settings of copy `index` alone, besides its port. */
  copyEnv?: (c: Config, index: number) => Record<string, string>;
}

/** The worker processes of the list a wing may size. */
export type SizedProcess = 'face' | 'search';

const SIZING: Partial<Record<SizedProcess, { wing: string; sizing: ProcessSizing }>> = {};

/** Records a wing's sizing of a worker process (platform/wing.ts `composeWings`); a process is sized by one wing. Idempotent. */
export function registerProcessSizing(process: SizedProcess, wing: string, sizing: ProcessSizing): void {
  const known = SIZING[process];
  if (known && known.wing !== wing) throw new Error(`The ${process} process is sized by wing ${known.wing} already, not also by ${wing}`);
  SIZING[process] = { wing, sizing };
}

const sized = (process: SizedProcess): Pick<ServiceProcess, 'copies' | 'copyEnv'> => ({
  copies: (c) => SIZING[process]?.sizing.copies(c) ?? 1,
  copyEnv: (c, index) => SIZING[process]?.sizing.copyEnv?.(c, index) ?? {},
});

/** In start order; `npm start` stops web first (it drains its in-flight requests), then the workers. */
export const SERVICE_PROCESSES: readonly ServiceProcess[] = [
  { name: 'web', file: 'processes/web.ts', role: 'the API, the consoles and the registry simulator', drainsFirst: true },
  {
    name: 'face',
    file: 'processes/face.ts',
    role: 'the face worker (liveness, embed and light queues)',
    ...sized('face'),
    healthPortEnv: 'FACE_ENGINE_PORT',
  },
  {
    name: 'search',
    file: 'processes/search.ts',
    role: 'a search replica (search queue), or a replica of one shard (SEARCH_SHARDS > 1)',
    ...sized('search'),
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
