/**
 * A least-privilege role for the application (docs/security.md): `faceid_app` may read and write the
 * product's rows and nothing more — no DDL, no TRUNCATE, no reading or changing the migration
 * bookkeeping, and AuditEvent rows can be added and read but never changed or deleted. Migrations keep
 * running as the owner (`npm run migrate`, the Procfile's `release`, with MIGRATION_DATABASE_URL when
 * set); the web process and the workers connect as a login role that is a member of `faceid_app`
 * (created by the database administrator: `CREATE ROLE faceid_web LOGIN PASSWORD '…' IN ROLE faceid_app`).
 *
 * The role is cluster-wide and NOLOGIN; its creation tolerates a concurrent migration of another
 * database of the same cluster (tests migrate many at once). Grants are per database.
 */
import type { Knex } from 'knex';

export const APP_ROLE = 'faceid_app';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DO $$
    BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${APP_ROLE}') THEN
        CREATE ROLE ${APP_ROLE} NOLOGIN;
      END IF;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END $$`);
  await knex.raw(`DO $$ BEGIN EXECUTE format('GRANT CONNECT ON DATABASE %I TO ${APP_ROLE}', current_database()); END $$`);
  await knex.raw(`GRANT USAGE ON SCHEMA public TO ${APP_ROLE}`);
  await knex.raw(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${APP_ROLE}`);
  await knex.raw(`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO ${APP_ROLE}`);
  // Tables of later migrations get the same grants; the ones below are then taken back explicitly.
  await knex.raw(`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${APP_ROLE}`);
  await knex.raw(`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO ${APP_ROLE}`);
  await knex.raw(`REVOKE ALL ON knex_migrations, knex_migrations_lock FROM ${APP_ROLE}`);
  await knex.raw(`REVOKE UPDATE, DELETE ON audit_events FROM ${APP_ROLE}`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM ${APP_ROLE}`);
  await knex.raw(`ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON SEQUENCES FROM ${APP_ROLE}`);
  await knex.raw(`REVOKE ALL ON ALL TABLES IN SCHEMA public FROM ${APP_ROLE}`);
  await knex.raw(`REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM ${APP_ROLE}`);
  await knex.raw(`REVOKE USAGE ON SCHEMA public FROM ${APP_ROLE}`);
  await knex.raw(`DO $$ BEGIN EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM ${APP_ROLE}', current_database()); END $$`);
  // The role itself stays: other databases of the cluster may still grant to it.
}
