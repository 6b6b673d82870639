/**
 * A process's life: start what it runs, stop it gracefully on SIGINT/SIGTERM (run the cleanup once,
 * then exit; a second signal exits at once, unless it is the first one delivered twice: see
 * REPEATED_SIGNAL_MS). Used by the entry files in processes/.
 * Under `npm start` (SUPERVISOR_PID, `supervisorPid`, set by platform/processes/supervisor.ts) a process also stops when its
 * supervisor is gone (it was re-parented): no orphan keeps a port after the supervisor was killed.
 */
import { fileURLToPath } from 'node:url';
import { config, logConfigAtStart, type Config } from '../config.js';
import { createLogger, type Logger } from '../logger.js';

/**
 * A second signal within this time of the first is the same stop delivered twice, not an operator
 * insisting: a process manager signals the whole process group (foreman, honcho, systemd's
 * KillMode=control-group; a terminal's Ctrl-C too), so under `npm run start:web` the node process gets
 * the signal once directly and once more relayed by npm a few milliseconds later (more under load).
 * Exiting on that one would cut the drain short.
 */
export const REPEATED_SIGNAL_MS = 1000;

/** After its drain, the web process has this long to close the rest (the upstream worker, PostgreSQL and Redis connections). */
export const CLOSE_AFTER_DRAIN_MS = 5_000;
/** How long a worker process takes at most to stop (finish or hand back its job) before it exits anyway. */
export const WORKER_STOP_MS = 10_000;
/** The web process's own stop deadline: its drain (SHUTDOWN_DRAIN_MS), then the closing. */
export const webStopMs = (c: Pick<Config, 'http'>): number => c.http.shutdownDrainMs + CLOSE_AFTER_DRAIN_MS;
/**
 * How long a supervisor (`npm start`) waits after SIGTERM before SIGKILL: beyond the longest stop
 * deadline of its children, so a child always ends by itself (its drain is never cut short).
 */
export const supervisorGraceMs = (c: Pick<Config, 'http'>): number => Math.max(webStopMs(c), WORKER_STOP_MS) + 2_000;

export function onShutdown(logger: Logger, cleanup: () => Promise<void>, graceMs = WORKER_STOP_MS, supervisorPid = 0): void {
  let stoppingSince = 0;
  const stop = (signal: string) => {
    if (stoppingSince) {
      if (Date.now() - stoppingSince < REPEATED_SIGNAL_MS) {
        logger.info({ signal }, 'signal repeated (delivered to the process group and relayed); still stopping');
        return;
      }
      // A second signal later on: stop at once.
      process.exit(1);
    }
    stoppingSince = Date.now();
    logger.info({ signal }, 'stopping');
    const force = setTimeout(() => process.exit(1), graceMs);
    force.unref();
    cleanup()
      .then(() => process.exit(0))
      .catch((e) => {
        logger.error({ err: e instanceof Error ? e.message : String(e) }, 'error while stopping');
        process.exit(1);
      });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  const supervisor = supervisorPid;
  if (supervisor > 0) {
    setInterval(() => {
      if (process.ppid !== supervisor && !stoppingSince) stop('supervisor gone');
    }, 1000).unref();
  }
}

/** True when the module of `importMetaUrl` is the file node was started with (not imported by a test). */
export function isEntryFile(importMetaUrl: string): boolean {
  return process.argv[1] !== undefined && fileURLToPath(importMetaUrl) === process.argv[1];
}

/**
 * Runs a process: reads the configuration, starts what `start` builds, and stops it on a signal. A
 * start that throws ends the process with status 1 (its orchestrator restarts it or reports it).
 */
export async function runProcess(name: string, start: (config: Config, logger: Logger) => Promise<{ close(): Promise<void> }>): Promise<void> {
  const cfg = config();
  const logger = createLogger({ level: cfg.runtime.logLevel, format: cfg.runtime.logFormat, name });
  logConfigAtStart(logger, cfg, name);
  try {
    const running = await start(cfg, logger);
    onShutdown(logger, () => running.close(), WORKER_STOP_MS, cfg.supervisor.pid);
  } catch (e) {
    logger.fatal({ err: e instanceof Error ? e.message : String(e) }, `${name} failed to start`);
    process.exit(1);
  }
}
