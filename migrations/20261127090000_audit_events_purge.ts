/**
 * Audit retention under the least-privilege role (docs/data-protection.md): `faceid_app` may not
 * DELETE from audit_events (migrations/20261126080100_app_role.ts). The retention sweep deletes rows
 * past RETENTION_DAYS_AUDIT_EVENTS through this function instead, which runs with its owner's rights
 * (the owner role that runs the migrations) and can only delete rows older than `keep_days` by the
 * database's clock, never fewer than 365 days: the application can age the log out, not rewrite it.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION purge_audit_events(keep_days integer, batch integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    DECLARE
      n integer;
    BEGIN
      IF keep_days IS NULL OR keep_days < 365 THEN
        RAISE EXCEPTION 'audit events are kept at least 365 days (asked: %)', keep_days USING ERRCODE = '42501';
      END IF;
      DELETE FROM public.audit_events WHERE id IN (
        SELECT id FROM public.audit_events
        WHERE created_at < now() - make_interval(days => keep_days)
        LIMIT least(greatest(coalesce(batch, 1000), 1), 10000));
      GET DIAGNOSTICS n = ROW_COUNT;
      RETURN n;
    END $$`);
  await knex.raw('REVOKE ALL ON FUNCTION purge_audit_events(integer, integer) FROM PUBLIC');
  await knex.raw('GRANT EXECUTE ON FUNCTION purge_audit_events(integer, integer) TO faceid_app');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION IF EXISTS purge_audit_events(integer, integer)');
}
