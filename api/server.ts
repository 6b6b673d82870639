/** The `web` process: the API and the registry simulator on PORT. */
import { config, describeConfig } from '../shared/config.js';
import { closeDeps, createDeps } from './deps.js';
import { startWeb } from './http-server.js';
import { ensureFirstAdministrator } from './services/operator-service.js';
import { onShutdown } from '../shared/shutdown.js';

const cfg = config();
const deps = createDeps(cfg);
deps.logger.info({ config: describeConfig(cfg) }, 'web starting');
// ADMIN_IDENTIFIER / ADMIN_PASSWORD: the first administrator, when none is active yet.
await ensureFirstAdministrator(deps);
const web = await startWeb(deps);
deps.logger.info({ url: `http://${cfg.host}:${web.server.address() && (web.server.address() as { port: number }).port}` }, 'web listening');

onShutdown(deps.logger, async () => {
  await web.close();
  await closeDeps(deps);
});
