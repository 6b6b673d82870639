/**
 * Preferences (SPEC section 10): how the consumer wants to be notified, the language of messages, and
 * the marketing opt-in. A user without a row has the defaults; PATCH stores only what it is sent.
 */
import type { Knex } from 'knex';
import { recordAudit } from './audit-events.js';

export const NOTIFY_CHANNELS = ['sms', 'none'] as const;
export const LANGUAGES = ['en', 'ha', 'ig', 'yo', 'pcm'] as const;

export interface Preferences {
  notifyChannel: (typeof NOTIFY_CHANNELS)[number];
  language: (typeof LANGUAGES)[number];
  marketingOptIn: boolean;
}

export const DEFAULT_PREFERENCES: Readonly<Preferences> = Object.freeze({ notifyChannel: 'sms', language: 'en', marketingOptIn: false });

function view(row: Partial<Preferences> | undefined): Preferences {
  return {
    notifyChannel: row?.notifyChannel ?? DEFAULT_PREFERENCES.notifyChannel,
    language: row?.language ?? DEFAULT_PREFERENCES.language,
    marketingOptIn: row?.marketingOptIn ?? DEFAULT_PREFERENCES.marketingOptIn,
  };
}

export async function getPreferences(db: Knex, userId: string): Promise<Preferences> {
  return view(await db('preferences').where({ userId }).first('notifyChannel', 'language', 'marketingOptIn'));
}

export async function updatePreferences(db: Knex, userId: string, change: Partial<Preferences>): Promise<Preferences> {
  const fields = (Object.keys(change) as (keyof Preferences)[]).filter((k) => change[k] !== undefined);
  if (fields.length === 0) return getPreferences(db, userId);
  return db.transaction(async (trx) => {
    const before = view(await trx('preferences').where({ userId }).forUpdate().first('notifyChannel', 'language', 'marketingOptIn'));
    const patch: Partial<Preferences> = {};
    for (const k of fields) (patch as Record<string, unknown>)[k] = change[k];
    const [row] = await trx('preferences')
      .insert({ userId, ...DEFAULT_PREFERENCES, ...patch, updatedAt: trx.fn.now() })
      .onConflict('userId')
      .merge({ ...patch, updatedAt: trx.fn.now() })
      .returning(['notifyChannel', 'language', 'marketingOptIn']);
    const after = view(row);
    const changed = fields.filter((k) => before[k] !== after[k]);
    if (changed.length) {
      await recordAudit(trx, {
        type: 'preferences.changed',
        actorType: 'consumer',
        actorId: userId,
        subjectType: 'user',
        subjectId: userId,
        data: Object.fromEntries(changed.map((k) => [k, { from: before[k], to: after[k] }])),
      });
    }
    return after;
  });
}
