/**
 * The processes of the service, written once: `npm start` (scripts/start.ts) runs them under its
 * supervisor, the Procfile (for foreman, honcho, a PaaS) lists them, and `npm run start:<name>` runs
 * one. test/process-list.test.ts checks the Procfile and package.json against this list.
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
  /**
   * The setting of the port its first copy answers `/health` on (the API watches it); the other
   * copies get 0 (a free port each).
   */
  healthPortEnv?: string;
}

/** In start order; `npm start` stops web first (it drains its in-flight requests), then the workers. */
export const SERVICE_PROCESSES: readonly ServiceProcess[] = [
  { name: 'web', file: 'processes/web.ts', role: 'the API, the consoles and the registry simulator' },
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
    role: 'a search replica (search queue)',
    copies: (c) => c.search.processes,
    healthPortEnv: 'SEARCH_HEALTH_PORT',
  },
];

/**
 * Runs once before the processes start, to completion (the Procfile's `release`). Not `npm run migrate`:
 * that script says NODE_ENV=development when NODE_ENV is unset, so a release would skip production's
 * refusals; like the processes, the release runs in production unless told otherwise.
 */
export const RELEASE_COMMAND = 'exec node --import tsx scripts/migrate.ts latest';

/** The Procfile these processes make: `release`, then `<name>: exec node --import tsx <file>` each. */
export function procfileText(): string {
  return ['release: ' + RELEASE_COMMAND, ...SERVICE_PROCESSES.map((p) => `${p.name}: exec node --import tsx ${p.file}`)].join('\n') + '\n';
}
