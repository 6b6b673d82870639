/** Graceful stop on SIGINT/SIGTERM: run the cleanup once, then exit; a second signal exits at once. */
import type { Logger } from './logger.js';

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
}
