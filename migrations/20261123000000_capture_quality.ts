/**
 * Capture quality (docs/face-engine.md, "Capture quality"): the 0..100 quality score of the capture
 * behind each SearchLog row and behind each canonical embedding. Nullable: rows written before this
 * migration, and calls that never reached a face (no face, bad image, engine down), have none.
 * The /verify/self refresh rule compares a new capture's score with the stored embedding's.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('search_logs', (t) => {
    t.smallint('quality_score');
  });
  await knex.schema.alterTable('canonical_embeddings', (t) => {
    t.smallint('quality_score');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('canonical_embeddings', (t) => {
    t.dropColumn('quality_score');
  });
  await knex.schema.alterTable('search_logs', (t) => {
    t.dropColumn('quality_score');
  });
}
