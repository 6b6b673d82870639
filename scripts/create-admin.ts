/**
 * `npm run create-admin -- <identifier> [display name]`: creates a flagged administrator and prints
 * its temporary password once (it must be changed at the first sign-in, POST /auth/operator/set-password).
 * Creates and migrates the database when needed. Exits 1 when the identifier is taken, 2 on bad usage.
 */
import { config } from '../processes/config.js';
import { createDb, ensureDatabase, migrateLatest } from '../platform/database/db.js';
import { AppError } from '../platform/errors.js';
import { operatorServiceOn } from '../features/staff/service.js';

const [identifier, ...nameParts] = process.argv.slice(2);
if (!identifier || identifier.startsWith('-')) {
  console.error('usage: npm run create-admin -- <identifier> [display name]');
  process.exit(2);
}

const cfg = config();
// It may migrate first: as the owner (MIGRATION_DATABASE_URL) when the application's login has less.
const ownerUrl = cfg.database.migrationUrl || cfg.database.url;
await ensureDatabase(ownerUrl);
const db = createDb(ownerUrl, 1);
try {
  await migrateLatest(db);
  const { operator, temporaryPassword } = await operatorServiceOn(db).create(
    { identifier, displayName: nameParts.join(' ') || identifier, role: 'administrator' },
    { type: 'system' },
    { via: 'create-admin' },
  );
  console.log(`Administrator "${operator.identifier}" created (id ${operator.id}).`);
  console.log('Temporary password (shown once; it must be changed at the first sign-in):');
  console.log(temporaryPassword);
} catch (e) {
  if (e instanceof AppError && (e.code === 'conflict' || e.code === 'validation_failed')) {
    console.error(e.code === 'conflict' ? `error: the identifier "${identifier}" is already taken` : `error: ${JSON.stringify(e.details)}`);
    process.exitCode = 1;
  } else {
    throw e;
  }
} finally {
  await db.destroy();
}
