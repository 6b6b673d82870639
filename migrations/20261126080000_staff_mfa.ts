/**
 * Staff accounts (docs/security.md): the TOTP second factor and its recovery codes, and the age of an
 * operator's password (a temporary one expires after TEMP_PASSWORD_TTL_SECONDS).
 *
 * - operators.mfa_secret / mfa_pending_secret: the TOTP secret, encrypted (AES-256-GCM with
 *   MFA_ENCRYPTION_KEY; never stored in clear); pending between setup and confirmation.
 * - operators.mfa_last_step: the last TOTP time step accepted, moved by a conditional UPDATE, so that a
 *   code is accepted once, whatever the concurrency (no replay within its window).
 * - operator_recovery_codes: single-use codes, SHA-256 only (each holds 80 random bits).
 * - operators.password_set_at: set by a trigger whenever the password hash changes (a reset, a new
 *   password), so no path that changes a password can forget it.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('operators', (t) => {
    t.text('mfa_secret');
    t.text('mfa_pending_secret');
    t.timestamp('mfa_enabled_at', { useTz: true });
    t.bigInteger('mfa_last_step');
    t.timestamp('password_set_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(`
    CREATE FUNCTION operators_password_set_at() RETURNS trigger AS $$
    BEGIN
      IF NEW.password_hash IS DISTINCT FROM OLD.password_hash THEN NEW.password_set_at := now(); END IF;
      RETURN NEW;
    END $$ LANGUAGE plpgsql`);
  await knex.raw('CREATE TRIGGER operators_password_set_at BEFORE UPDATE ON operators FOR EACH ROW EXECUTE FUNCTION operators_password_set_at()');
  await knex.schema.createTable('operator_recovery_codes', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('operator_id').notNullable().references('operators.id').onDelete('CASCADE');
    t.text('code_hash').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('used_at', { useTz: true });
    t.unique(['operator_id', 'code_hash']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('operator_recovery_codes');
  await knex.raw('DROP TRIGGER IF EXISTS operators_password_set_at ON operators');
  await knex.raw('DROP FUNCTION IF EXISTS operators_password_set_at()');
  await knex.schema.alterTable('operators', (t) => {
    t.dropColumn('password_set_at');
    t.dropColumn('mfa_last_step');
    t.dropColumn('mfa_enabled_at');
    t.dropColumn('mfa_pending_secret');
    t.dropColumn('mfa_secret');
  });
}
