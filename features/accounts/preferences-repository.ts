/** A consumer's preferences (SPEC section 10); a user without a row has the defaults. */
import type { Knex } from 'knex';
import { Preference } from '../../models/index.js';
import { Repository, type Db } from '../../platform/database/unit-of-work.js';

export type PreferenceFields = Pick<Preference, 'notifyChannel' | 'language' | 'marketingOptIn'>;

const FIELDS = ['notifyChannel', 'language', 'marketingOptIn'] as const;

export class PreferencesRepository extends Repository {
  async find(userId: string, trx?: Db): Promise<PreferenceFields | undefined> {
    return Preference.query(this.on(trx))
      .findById(userId)
      .select(...FIELDS);
  }

  /** The row locked for the rest of the transaction (a concurrent change waits for this one). */
  async findForUpdate(userId: string, trx: Knex.Transaction): Promise<PreferenceFields | undefined> {
    return Preference.query(trx)
      .findById(userId)
      .forUpdate()
      .select(...FIELDS);
  }

  /** Creates the row from `defaults` + `patch`, or applies `patch` to the existing one; returns the result. */
  async upsert(userId: string, defaults: PreferenceFields, patch: Partial<PreferenceFields>, trx?: Db): Promise<PreferenceFields> {
    const db = this.on(trx);
    const [row] = await db(Preference.tableName)
      .insert({ userId, ...defaults, ...patch, updatedAt: db.fn.now() })
      .onConflict('userId')
      .merge({ ...patch, updatedAt: db.fn.now() })
      .returning([...FIELDS]);
    return row;
  }
}
