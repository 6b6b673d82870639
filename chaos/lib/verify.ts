/**
 * Lost answered writes, read back from PostgreSQL after a layout's run: every answer 200 the load got
 * for a write must be stored.
 *   - /identify: its SearchLog row (search_logs.id = referenceId);
 *   - preferences: the last answered language is the stored one;
 *   - link: the nin_links row of that user and NIN (once the user is deleted, the row keeps only the
 *     NIN's keyed hash: erasure);
 *   - phone change: the user's stored phone is the last one answered for them (none once deleted);
 *   - deletion: the user is deleted, and no /identify sent after the deletion's answer listed them.
 * A deleted user counts as erased whether or not the deletion's answer reached the load (a retry after
 * an applied deletion meets 404).
 */
import type { Knex } from 'knex';
import type { AnsweredWrites } from './load.js';

export interface WriteCheck {
  identifyAnswered: number;
  identifyWithoutSearchLog: number;
  preferencesAnswered: number;
  lastPreferencesStored: boolean | null;
  linksAnswered: number;
  linksMissing: number;
  phoneChangesAnswered: number;
  phonesNotStored: number;
  deletionsAnswered: number;
  deletionsNotStored: number;
  /** /identify answers sent after a deletion was answered that still listed the deleted user. */
  deletedUsersReturned: number;
  /** Sum of the losses above. */
  lost: number;
}

async function inChunks<T>(ids: string[], fn: (chunk: string[]) => Promise<T[]>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < ids.length; i += 500) out.push(...(await fn(ids.slice(i, i + 500))));
  return out;
}

/** `ninHash`: the keyed hash an erased link row keeps of its NIN (the layout's LINK_NUMBER_HASH_KEY). */
export async function verifyWrites(db: Knex, w: AnsweredWrites, ninHash: (nin: string) => string): Promise<WriteCheck> {
  const refs = w.identify.map((x) => x.referenceId).filter(Boolean);
  const found = new Set((await inChunks(refs, (c) => db('searchLogs').whereIn('id', c).select('id'))).map((r: { id: string }) => r.id));

  const lastPref = [...w.preferences].sort((a, b) => a.doneAt - b.doneAt).at(-1);
  const storedPref = lastPref ? await db('preferences').where({ userId: lastPref.userId }).first('language') : undefined;

  const linkRows = await inChunks(
    w.links.map((x) => x.userId),
    (c) => db('ninLinks').whereIn('userId', c).select('userId', 'nin', 'numberHash'),
  );
  const links = new Set(linkRows.map((r: { userId: string; nin: string | null }) => `${r.userId} ${r.nin}`));
  const erasedLinks = new Set(
    linkRows.filter((r: { nin: string | null }) => r.nin === null).map((r: { userId: string; numberHash: string }) => `${r.userId} ${r.numberHash}`),
  );

  const lastPhone = new Map<string, string>();
  for (const p of [...w.phones].sort((a, b) => a.doneAt - b.doneAt)) lastPhone.set(p.userId, p.phone);
  const userIds = [...new Set([...lastPhone.keys(), ...w.links.map((l) => l.userId), ...w.deletions.map((d) => d.userId)])];
  const users = new Map(
    (await inChunks(userIds, (c) => db('users').whereIn('id', c).select('id', 'phone', 'deletedAt'))).map(
      (u: { id: string; phone: string; deletedAt: Date | null }) => [u.id, u],
    ),
  );

  const erased = (userId: string) => Boolean(users.get(userId)?.deletedAt);
  const deletedAt = new Map(w.deletions.map((d) => [d.userId, d.doneAt]));
  const returned = w.identify.filter((x) => x.candidates.some((id) => deletedAt.has(id) && x.sentAt > deletedAt.get(id)!)).length;

  const r: Omit<WriteCheck, 'lost'> = {
    identifyAnswered: refs.length,
    identifyWithoutSearchLog: refs.filter((id) => !found.has(id)).length,
    preferencesAnswered: w.preferences.length,
    lastPreferencesStored: lastPref ? storedPref?.language === lastPref.language : null,
    linksAnswered: w.links.length,
    linksMissing: w.links.filter((x) => (erased(x.userId) ? !erasedLinks.has(`${x.userId} ${ninHash(x.nin)}`) : !links.has(`${x.userId} ${x.nin}`))).length,
    phoneChangesAnswered: w.phones.length,
    phonesNotStored: [...lastPhone].filter(([id, phone]) => (erased(id) ? users.get(id)?.phone !== null : users.get(id)?.phone !== phone)).length,
    deletionsAnswered: w.deletions.length,
    deletionsNotStored: w.deletions.filter((d) => !users.get(d.userId)?.deletedAt).length,
    deletedUsersReturned: returned,
  };
  return { ...r, lost: r.identifyWithoutSearchLog + (r.lastPreferencesStored === false ? 1 : 0) + r.linksMissing + r.phonesNotStored + r.deletionsNotStored };
}
