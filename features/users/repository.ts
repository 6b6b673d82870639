/**
 * Users and their NIN / BVN links: one module for both, since the link tables are read by the identity
 * workflow, the profile, and the first link's profile fill alike.
 */
import type { Knex } from 'knex';
import { BvnLink, NinLink, User, type RegistryRecordSnapshot } from '../../models/index.js';
import { fn } from 'objection';
import { config } from '../../platform/config.js';
import { NumberHasher } from '../../platform/keys/number-hash.js';
import { Repository, type Db } from '../../platform/database/unit-of-work.js';

export type Registry = 'nin' | 'bvn';

const LINK_TABLE: Record<Registry, string> = { nin: NinLink.tableName, bvn: BvnLink.tableName };

/** The profile as the consumer sees it, with whether each registry is linked. */
export interface UserRow {
  id: string;
  phone: string;
  name: string | null;
  dateOfBirth: string | null;
  gender: string | null;
  bankAccount: string | null;
  pendingBankAccount: string | null;
  ninLinked: boolean;
  bvnLinked: boolean;
  createdAt: Date;
}

export interface LinkHolder {
  userId: string;
  linkedAt: Date;
  deviceHint: string | null;
  deletedAt: Date | null;
}

export interface NewLink {
  userId: string;
  number: string;
  registryRecord: RegistryRecordSnapshot;
  deviceHint: string;
  matchScore: number;
  crossRegistryFlagged: boolean;
}

export interface ProfileChange {
  phone?: string;
  pendingBankAccount?: string;
  pendingBankAccountRequestedAt?: Date;
}

/**
 * Link rows carry `number_hash` (the keyed hash of the number, platform/keys/number-hash.ts) beside the
 * number: a number is looked up, held once, and released by its hash, so an erased row (which keeps the
 * hash alone) is still recognised.
 */
export class UsersRepository extends Repository {
  constructor(
    db: Knex,
    private readonly hasher: NumberHasher = NumberHasher.from(config().keys),
  ) {
    super(db);
  }

  // ---- users -------------------------------------------------------------------------------

  /** A live (not deleted) user's profile and link flags, or null. */
  async findLiveView(userId: string, trx?: Db): Promise<UserRow | null> {
    const db = this.on(trx);
    const linked = (r: Registry) => db.raw(`EXISTS (SELECT 1 FROM ${LINK_TABLE[r]} l WHERE l.user_id = u.id) AS ${r}_linked`);
    const row = await db(`${User.tableName} as u`)
      .where('u.id', userId)
      .whereNull('u.deletedAt')
      .first('u.id', 'u.phone', 'u.name', 'u.dateOfBirth', 'u.gender', 'u.bankAccount', 'u.pendingBankAccount', 'u.createdAt', linked('nin'), linked('bvn'));
    return row ?? null;
  }

  /** Whether the user exists and when it was deleted (null: live); undefined when there is no such user. */
  async deletedAt(userId: string, trx?: Db): Promise<Date | null | undefined> {
    // A plain query, not objection's: read by the authoriser on every request of a consumer.
    const row: Pick<User, 'deletedAt'> | undefined = await this.on(trx)(User.tableName).where({ id: userId }).first('deletedAt');
    return row ? row.deletedAt : undefined;
  }

  async findLive(userId: string, trx?: Db): Promise<Pick<User, 'phone' | 'bankAccount'> | undefined> {
    return User.query(this.on(trx)).findById(userId).whereNull('deletedAt').select('phone', 'bankAccount');
  }

  /** The subset of `userIds` whose accounts are live. */
  async liveIds(userIds: string[], trx?: Db): Promise<Set<string>> {
    if (userIds.length === 0) return new Set();
    const rows = await User.query(this.on(trx)).whereIn('id', userIds).whereNull('deletedAt').select('id');
    return new Set(rows.map((r) => r.id));
  }

  async phoneTakenByAnother(phone: string, userId: string, trx?: Db): Promise<boolean> {
    return Boolean(await User.query(this.on(trx)).where({ phone }).whereNull('deletedAt').whereNot('id', userId).select('id').first());
  }

  /** The live account holding this phone, if any. */
  async liveIdByPhone(phone: string): Promise<string | undefined> {
    return (await User.query(this.db).where({ phone }).whereNull('deletedAt').select('id').first())?.id;
  }

  /** The live account of this phone, created on the first successful sign-in (race-safe). */
  async findOrCreateByPhone(phone: string): Promise<string> {
    const inserted = await this.db.raw(
      `INSERT INTO ${User.tableName} (phone) VALUES (?) ON CONFLICT (phone) WHERE deleted_at IS NULL DO NOTHING RETURNING id`,
      [phone],
    );
    const row = inserted.rows?.[0] as { id: string } | undefined;
    if (row) return row.id;
    const existing = await User.query(this.db).where({ phone }).whereNull('deletedAt').select('id').first();
    if (!existing) throw new Error('user neither inserted nor found');
    return existing.id;
  }

  /** Applies a profile change to a live user; false when there is none. */
  async updateLive(userId: string, change: ProfileChange, trx?: Db): Promise<boolean> {
    const updated = await User.query(this.on(trx))
      .findById(userId)
      .whereNull('deletedAt')
      .patch({ ...change, updatedAt: fn.now() });
    return updated > 0;
  }

  /**
   * Soft-deletes a live user and erases what identifies them: phone, name, date of birth, gender, bank
   * account (and a pending change) leave the row; the link rows keep their keyed hash and nothing else
   * personal (no number, no registry record, no device hint). False when there is no live user.
   */
  /**
   * Erases a live user's personal columns and link numbers; returns the phone it erased (what keys the
   * phone's Redis state, for the caller to purge), or null when there is no live user of that id.
   */
  async softDelete(userId: string, trx?: Db): Promise<{ phone: string } | null> {
    const db = this.on(trx);
    const live = await User.query(db).findById(userId).whereNull('deletedAt').select('phone').forUpdate();
    if (!live) return null;
    const deleted = await User.query(db)
      .findById(userId)
      .whereNull('deletedAt')
      .patch({
        deletedAt: fn.now(),
        updatedAt: fn.now(),
        phone: null as unknown as string, // erased rows only: live rows always have a phone
        name: null,
        dateOfBirth: null,
        gender: null,
        bankAccount: null,
        pendingBankAccount: null,
        pendingBankAccountRequestedAt: null,
      });
    if (deleted === 0) return null;
    for (const registry of ['nin', 'bvn'] as const) {
      await db(LINK_TABLE[registry])
        .where({ userId })
        .update({ [registry]: null, registryRecord: null, deviceHint: null });
    }
    return { phone: live.phone };
  }

  /** The user's links as their data export shows them (the number is masked by the caller). */
  async linksOf(
    userId: string,
    trx?: Db,
  ): Promise<
    {
      registry: Registry;
      number: string | null;
      linkedAt: Date;
      deviceHint: string | null;
      crossRegistryFlagged: boolean;
      registryRecord: RegistryRecordSnapshot | null;
    }[]
  > {
    const out = [];
    for (const registry of ['nin', 'bvn'] as const) {
      const rows = await this.on(trx)(LINK_TABLE[registry])
        .where({ userId })
        .select(`${registry} as number`, 'linkedAt', 'deviceHint', 'crossRegistryFlagged', 'registryRecord');
      out.push(
        ...rows.map(
          (r: {
            number: string | null;
            linkedAt: Date;
            deviceHint: string | null;
            crossRegistryFlagged: boolean;
            registryRecord: RegistryRecordSnapshot | null;
          }) => ({ registry, ...r }),
        ),
      );
    }
    return out;
  }

  /** The keyed hash of a number (what a link row keeps). */
  numberHash(registry: Registry, number: string): string {
    return this.hasher.hash(registry, number);
  }

  /** Name, date of birth and gender from a registry record (the first link fills the profile). */
  async fillProfile(userId: string, profile: { name: string; dateOfBirth: string; gender: string }, trx?: Db): Promise<void> {
    await User.query(this.on(trx))
      .findById(userId)
      .patch({ ...profile, updatedAt: fn.now() });
  }

  /** Applies a pending bankAccount change if it is still the one requested at `requestedAt`. */
  async confirmPendingBankAccount(userId: string, requestedAt: Date, trx?: Db): Promise<boolean> {
    const db = this.on(trx);
    const updated = await db(User.tableName)
      .where({ id: userId, pendingBankAccountRequestedAt: requestedAt })
      .whereNotNull('pendingBankAccount')
      .whereNull('deletedAt')
      .update({ bankAccount: db.ref('pendingBankAccount'), pendingBankAccount: null, pendingBankAccountRequestedAt: null, updatedAt: db.fn.now() })
      .returning(['id']);
    return updated.length > 0;
  }

  /** Live users with a pending bankAccount change, oldest request first (the upstream repair sweep). */
  async pendingBankAccounts(limit: number, trx?: Db): Promise<{ id: string; pendingBankAccountRequestedAt: Date }[]> {
    return this.on(trx)(User.tableName)
      .whereNotNull('pendingBankAccount')
      .whereNotNull('pendingBankAccountRequestedAt')
      .whereNull('deletedAt')
      .orderBy('pendingBankAccountRequestedAt')
      .limit(limit)
      .select('id', 'pendingBankAccountRequestedAt');
  }

  // ---- NIN / BVN links ---------------------------------------------------------------------

  /** Who holds this number, if anyone (a deleted account may still hold it). */
  async linkHolder(registry: Registry, number: string, trx?: Db): Promise<LinkHolder | undefined> {
    const t = LINK_TABLE[registry];
    return this.on(trx)(t)
      .join(User.tableName, `${User.tableName}.id`, `${t}.userId`)
      .where((q) => q.where(`${t}.${registry}`, number).orWhere(`${t}.numberHash`, this.hasher.hash(registry, number)))
      .first(`${t}.userId as userId`, `${t}.linkedAt as linkedAt`, `${t}.deviceHint as deviceHint`, `${User.tableName}.deletedAt as deletedAt`);
  }

  async hasLink(registry: Registry, userId: string, trx?: Db): Promise<boolean> {
    return Boolean(await this.on(trx)(LINK_TABLE[registry]).where({ userId }).first('id'));
  }

  /** The registry record the user's link of `registry` was made with, or undefined. */
  async linkedRecord(registry: Registry, userId: string, trx?: Db): Promise<RegistryRecordSnapshot | undefined> {
    const row = await this.on(trx)(LINK_TABLE[registry]).where({ userId }).first('registryRecord');
    return row?.registryRecord;
  }

  /**
   * Deletes the link rows of `number` still held by deleted accounts (the number is free again, as its
   * phone number is); returns whom they belonged to.
   */
  async releaseFromDeletedAccounts(registry: Registry, number: string, trx: Knex.Transaction): Promise<{ userId: string; linkedAt: Date }[]> {
    return trx(LINK_TABLE[registry])
      .where((q) => q.where(registry, number).orWhere('numberHash', this.hasher.hash(registry, number)))
      .whereIn('userId', trx(User.tableName).select('id').whereNotNull('deletedAt'))
      .del()
      .returning(['userId', 'linkedAt']);
  }

  /** Inserts a link; a number or user already linked is a unique violation (23505). */
  async insertLink(registry: Registry, link: NewLink, trx?: Db): Promise<{ linkedAt: Date }> {
    const [row] = await this.on(trx)(LINK_TABLE[registry])
      .insert({
        userId: link.userId,
        [registry]: link.number,
        numberHash: this.hasher.hash(registry, link.number),
        registryRecord: JSON.stringify(link.registryRecord),
        deviceHint: link.deviceHint,
        matchScore: link.matchScore,
        crossRegistryFlagged: link.crossRegistryFlagged,
      })
      .returning(['linkedAt']);
    return row;
  }
}
