/**
 * Every table the interface document implies. PostgreSQL is the source of truth; Redis only holds
 * short-lived state (codes, single-use tokens, rate limits, queues).
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE EXTENSION IF NOT EXISTS pgcrypto');

  await knex.schema.createTable('users', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('phone').notNullable();
    t.text('name');
    t.date('date_of_birth');
    t.text('gender');
    // The BVN-linked field: a 10-digit NUBAN. A change waits for the upstream confirmation.
    t.text('bank_account');
    t.text('pending_bank_account');
    t.timestamp('pending_bank_account_requested_at', { useTz: true });
    t.timestamps(true, true);
    t.timestamp('deleted_at', { useTz: true });
  });
  // A phone identifies one live account; a deleted account frees its number.
  await knex.raw('CREATE UNIQUE INDEX users_phone_live_uq ON users (phone) WHERE deleted_at IS NULL');

  for (const registry of ['nin', 'bvn'] as const) {
    await knex.schema.createTable(`${registry}_links`, (t) => {
      t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
      t.uuid('user_id').notNullable().references('users.id').onDelete('CASCADE');
      t.string(registry, 11).notNullable();
      t.jsonb('registry_record').notNullable(); // name, date of birth, gender as the registry gave them
      t.text('device_hint');
      t.specificType('match_score', 'real');
      t.boolean('cross_registry_flagged').notNullable().defaultTo(false);
      t.timestamp('linked_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
      t.unique(['user_id']); // one NIN (one BVN) per account
      t.unique([registry]); // a number belongs to one account
    });
  }

  // One canonical embedding per user (512 float32, little-endian, in bytea).
  await knex.schema.createTable('canonical_embeddings', (t) => {
    t.uuid('user_id').primary().references('users.id').onDelete('CASCADE');
    t.binary('embedding').notNullable();
    t.text('source').notNullable(); // link_nin | link_bvn | verify_self
    t.text('engine_version').notNullable();
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  // The ordered change log the search workers replay (read-your-writes, see docs/vector-index.md).
  await knex.schema.createTable('embedding_changes', (t) => {
    t.bigIncrements('seq').primary();
    t.uuid('user_id').notNullable();
    t.text('op').notNullable(); // upsert | delete
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('operators', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('identifier').notNullable();
    t.text('display_name').notNullable();
    t.text('role').notNullable().defaultTo('operator'); // operator | administrator
    t.text('status').notNullable().defaultTo('active'); // active | deactivated
    t.boolean('must_reset_password').notNullable().defaultTo(true);
    t.text('password_hash').notNullable();
    t.integer('failed_login_count').notNullable().defaultTo(0);
    t.timestamp('locked_at', { useTz: true });
    t.text('org_id').notNullable().defaultTo('default');
    t.uuid('created_by');
    t.timestamps(true, true);
  });
  await knex.raw('CREATE UNIQUE INDEX operators_identifier_uq ON operators (lower(identifier))');

  await knex.schema.createTable('sessions', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('subject_type').notNullable(); // consumer | operator
    t.uuid('subject_id').notNullable();
    t.text('device_hint');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('revoked_at', { useTz: true });
    t.text('revoked_reason');
    t.index(['subject_type', 'subject_id']);
  });

  await knex.schema.createTable('refresh_tokens', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('session_id').notNullable().references('sessions.id').onDelete('CASCADE');
    t.text('token_hash').notNullable().unique();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.timestamp('used_at', { useTz: true }); // rotated: presenting it again is reuse
    t.index(['session_id']);
  });

  await knex.schema.createTable('search_logs', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()')); // the referenceId
    t.text('kind').notNullable(); // identify | verify_self
    t.uuid('operator_id').references('operators.id');
    t.text('org_id');
    t.uuid('user_id').references('users.id'); // the subject of a verify_self
    t.text('outcome').notNullable();
    t.jsonb('candidates').notNullable().defaultTo('[]'); // [{ userId, score, rank }]
    t.specificType('matched_user_ids', 'uuid[]').notNullable().defaultTo('{}');
    t.specificType('top_score', 'real');
    t.jsonb('latency_ms').notNullable(); // { liveness, embed, search, total }
    t.text('engine_version');
    t.text('error_code');
    t.timestamp('escalated_at', { useTz: true });
    t.uuid('escalated_by');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['operator_id', 'created_at']);
    t.index(['user_id', 'created_at']);
    t.index(['created_at']);
  });
  await knex.raw('CREATE INDEX search_logs_matched_gin ON search_logs USING gin (matched_user_ids)');

  await knex.schema.createTable('disputes', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('search_log_id').notNullable().references('search_logs.id');
    t.uuid('user_id').notNullable().references('users.id');
    t.string('reason', 2000);
    t.text('status').notNullable().defaultTo('open'); // open | investigating | resolved | rejected
    t.text('note');
    t.uuid('updated_by');
    t.timestamps(true, true);
    t.unique(['search_log_id', 'user_id']);
    t.index(['status', 'created_at']);
  });

  await knex.schema.createTable('audit_events', (t) => {
    t.bigIncrements('id').primary();
    t.text('type').notNullable();
    t.text('severity').notNullable().defaultTo('info'); // info | high
    t.text('actor_type'); // consumer | operator | system
    t.uuid('actor_id');
    t.text('subject_type');
    t.text('subject_id');
    t.jsonb('data').notNullable().defaultTo('{}');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['subject_type', 'subject_id']);
    t.index(['type', 'created_at']);
  });

  await knex.schema.createTable('preferences', (t) => {
    t.uuid('user_id').primary().references('users.id').onDelete('CASCADE');
    t.text('notify_channel').notNullable().defaultTo('sms');
    t.text('language').notNullable().defaultTo('en');
    t.boolean('marketing_opt_in').notNullable().defaultTo(false);
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  // The registry simulator's own persons (it is a separate system that happens to share the database).
  await knex.schema.createTable('registry_persons', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.string('nin', 11).unique();
    t.string('bvn', 11).unique();
    t.text('first_name').notNullable();
    t.text('last_name').notNullable();
    t.text('middle_name');
    t.date('date_of_birth').notNullable();
    t.text('gender').notNullable();
    t.text('phone');
    t.binary('photo').notNullable();
    t.text('photo_mime').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw("CREATE INDEX registry_persons_name_idx ON registry_persons (lower(first_name || ' ' || coalesce(middle_name, '') || ' ' || last_name))");
}

export async function down(knex: Knex): Promise<void> {
  for (const table of [
    'registry_persons',
    'preferences',
    'audit_events',
    'disputes',
    'search_logs',
    'refresh_tokens',
    'sessions',
    'operators',
    'embedding_changes',
    'canonical_embeddings',
    'bvn_links',
    'nin_links',
    'users',
  ]) {
    await knex.schema.dropTableIfExists(table);
  }
}
