/**
 * Starts the wings' workers of one role (platform/wing.ts `WorkerRoles`): each wing's manifest names
 * its worker for the roles it serves, and the process of that role starts them here, in the order of
 * processes/wings.ts; no process names a wing's worker. The `background` role adds the floor's own
 * queue first: the retention sweep on the `upstream` queue (./upstream/worker.ts).
 */
import type { BackgroundWorkerDeps, RunningWingWorker, WorkerRoles } from '../platform/wing.js';
import { startUpstreamWorker, type UpstreamWorkerOptions } from './upstream/worker.js';
import { WINGS } from './wings.js';

export interface StartWorkersOptions {
  /**
   * Called for a worker that fails to start. Given, the others start all the same and the process goes
   * on without it (the web process, which serves the API whatever its background queues do); without
   * it, the first failure closes the workers started and is thrown (a process that is only workers).
   */
  onStartFailure?: (name: string, e: unknown) => void;
}

type Start = { name: string; start: () => Promise<RunningWingWorker> };

async function startAll(starts: readonly Start[], opts: StartWorkersOptions): Promise<RunningWingWorker> {
  const started: RunningWingWorker[] = [];
  const close = async () => {
    for (const w of started.splice(0).reverse()) await w.close();
  };
  const { onStartFailure } = opts;
  if (onStartFailure) {
    // Side by side: each connects to Redis in its own time, and one that cannot start stops no other.
    const results = await Promise.all(
      starts.map(({ name, start }) =>
        start().catch((e: unknown) => {
          onStartFailure(name, e);
          return undefined;
        }),
      ),
    );
    for (const w of results) if (w) started.push(w);
  } else {
    for (const { start } of starts) {
      try {
        started.push(await start());
      } catch (e) {
        await close();
        throw e;
      }
    }
  }
  return { close };
}

/** Every wing's worker of `role`, started with what the process hands them. */
export function startWingWorkers<R extends keyof WorkerRoles>(role: R, deps: WorkerRoles[R], opts: StartWorkersOptions = {}): Promise<RunningWingWorker> {
  return startAll(wingStarts(role, deps), opts);
}

function wingStarts<R extends keyof WorkerRoles>(role: R, deps: WorkerRoles[R]): Start[] {
  return WINGS.flatMap((wing) => {
    const load = wing.workers?.[role];
    return load ? [{ name: wing.name, start: async () => (await load())(deps) }] : [];
  });
}

/** The background queues of a process (web by default, or `upstream`): the floor's retention sweep, then every wing's `background` worker. */
export function startBackgroundWorkers(deps: BackgroundWorkerDeps, opts: StartWorkersOptions & UpstreamWorkerOptions = {}): Promise<RunningWingWorker> {
  return startAll(
    [
      { name: 'upstream', start: () => startUpstreamWorker(deps.config, { db: deps.db, logger: deps.logger }, { scheduleRetention: opts.scheduleRetention }) },
      ...wingStarts('background', deps),
    ],
    opts,
  );
}
