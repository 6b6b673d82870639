/**
 * Preferences (SPEC section 10): how the consumer wants to be notified, the language of messages, and
 * the marketing opt-in. A user without a row has the defaults; PATCH stores only what it is sent.
 */
import type { AuditEventsRepository } from '../../platform/events/audit.js';
import type { UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { PreferencesRepository } from './preferences-repository.js';

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

export class PreferencesService {
  constructor(private readonly deps: { unitOfWork: UnitOfWork; auditEvents: AuditEventsRepository; preferences: PreferencesRepository }) {}

  async get(userId: string): Promise<Preferences> {
    return view(await this.deps.preferences.find(userId));
  }

  async update(userId: string, change: Partial<Preferences>): Promise<Preferences> {
    const { preferences } = this.deps;
    const fields = (Object.keys(change) as (keyof Preferences)[]).filter((k) => change[k] !== undefined);
    if (fields.length === 0) return this.get(userId);
    return this.deps.unitOfWork.run(async (trx) => {
      const before = view(await preferences.findForUpdate(userId, trx));
      const patch: Partial<Preferences> = {};
      for (const k of fields) (patch as Record<string, unknown>)[k] = change[k];
      const after = view(await preferences.upsert(userId, DEFAULT_PREFERENCES, patch, trx));
      const changed = fields.filter((k) => before[k] !== after[k]);
      if (changed.length) {
        await this.deps.auditEvents.record(
          {
            type: 'preferences.changed',
            actorType: 'consumer',
            actorId: userId,
            subjectType: 'user',
            subjectId: userId,
            data: Object.fromEntries(changed.map((k) => [k, { from: before[k], to: after[k] }])),
          },
          trx,
        );
      }
      return after;
    });
  }
}
