/** `npm run migrate` (latest) and `npm run migrate:down` (roll back every batch). Creates the database if needed. */
import { config } from '../processes/config.js';
import { createDb, ensureDatabase } from '../platform/database/db.js';

const direction = process.argv[2] ?? 'latest';
const cfg = config();
// Migrations run as the owner (MIGRATION_DATABASE_URL), the application as its least-privilege role.
const ownerUrl = cfg.database.migrationUrl || cfg.database.url;
await ensureDatabase(ownerUrl);
const db = createDb(ownerUrl, 1);
try {
  if (direction === 'latest') {
    const [, applied] = (await db.migrate.latest()) as [number, string[]];
    console.log(applied.length ? `migrations applied: ${applied.join(', ')}` : 'migrations: already up to date');
  } else if (direction === 'rollback') {
    const [, undone] = (await db.migrate.rollback(undefined, true)) as [number, string[]];
    console.log(undone.length ? `migrations rolled back: ${undone.join(', ')}` : 'migrations: nothing to roll back');
  } else {
    throw new Error(`unknown direction ${direction} (latest | rollback)`);
  }
} finally {
  await db.destroy();
}
