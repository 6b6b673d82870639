/**
 * A process's life: start what it runs, stop it gracefully on SIGINT/SIGTERM (run the cleanup once,
 * then exit; a second signal exits at once). Used by the entry files in processes/.
 * Under `npm start` (SUPERVISOR_PID set by scripts/supervisor.ts) a process also stops when its
 * supervisor is gone (it was re-parented): no orphan keeps a port after the supervisor was killed.
 */
import { fileURLToPath } from 'node:url';
import { config, describeConfig, type Config } from './config.js';
import { createLogger, type Logger } from './logger.js';

export function onShutdown(logger: Logger, cleanup: () => Promise<void>, graceMs = 10_000): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
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
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  const supervisor = Number(process.env.SUPERVISOR_PID);
  if (supervisor > 0) {
    setInterval(() => {
      if (process.ppid !== supervisor && !stopping) stop('supervisor gone');
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
export async function runProcess(
  name: string,
  start: (config: Config, logger: Logger) => Promise<{ close(): Promise<void> }>,
): Promise<void> {
  const cfg = config();
  const logger = createLogger({ level: cfg.logLevel, name });
  logger.info({ config: describeConfig(cfg) }, `${name} starting`);
  try {
    const running = await start(cfg, logger);
    onShutdown(logger, () => running.close());
  } catch (e) {
    logger.fatal({ err: e instanceof Error ? e.message : String(e) }, `${name} failed to start`);
    process.exit(1);
  }
}
