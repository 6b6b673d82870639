/**
 * Read-your-writes of the search replicas, checked on the load's answers (chaos/ha.ts): every
 * /identify answered 200 that was sent after a link was answered must list that user (every account
 * links the same face as the probe), unless the list may have been too short to hold every live
 * match, or the user may already be deleted when that /identify searched. The load has more accounts
 * (200) than a list holds (IDENTIFY_MAX_CANDIDATES, at most 100), and after an outage the links that
 * waited for it can briefly outnumber the deletions by enough: when more linked users may be live
 * than the list holds (links sent before the /identify was answered, less deletions answered before it
 * was sent), or the list is full, a user left out may just be below the cut (the accounts' faces
 * score alike); such pairs are counted apart (`fullLists`). A user may be deleted the first DELETE for the
 * account was sent before the /identify was answered. The first DELETE SENT, not the answered one:
 * a deletion whose answer was lost (its web process or host went away after the commit) is applied
 * all the same, the account's retry meets 404, and the user is rightly absent from then on.
 * Pairs are also counted per fault: link answered before the fault, /identify sent after it.
 */
import type { AnsweredWrites } from './load.js';

export interface ReadYourWrites {
  checked: number;
  missed: number;
  /** Pairs not checked because the list may not have held every live match (see above). */
  fullLists: number;
  /** Per fault: the pairs that straddle it (link answered before, /identify sent after). */
  acrossFaults: Record<string, { checked: number; missed: number }>;
  /** The users missed, with how many /identify answers missed each (what to look at first). */
  missedUsers: { userId: string; linkedAt: number; missedBy: number; firstMissSentAt: number }[];
}

export function readYourWrites(
  w: Pick<AnsweredWrites, 'links' | 'identify' | 'deletionsSent'> & { deletions?: AnsweredWrites['deletions'] },
  faults: { name: string; at: number }[] = [],
  /** IDENTIFY_MAX_CANDIDATES of the layout: a list this long may have left a match out. */
  listLimit = Infinity,
): ReadYourWrites {
  const deleteSentAt = new Map<string, number>();
  for (const d of w.deletionsSent) deleteSentAt.set(d.userId, Math.min(d.sentAt, deleteSentAt.get(d.userId) ?? Infinity));
  const acrossFaults: ReadYourWrites['acrossFaults'] = Object.fromEntries(faults.map((f) => [f.name, { checked: 0, missed: 0 }]));
  const missedUsers = new Map<string, ReadYourWrites['missedUsers'][number]>();
  let checked = 0;
  let missed = 0;
  let fullLists = 0;
  const linkSends = w.links.map((l) => l.sentAt).sort((a, b) => a - b);
  const deletionsDone = (w.deletions ?? []).map((d) => d.doneAt).sort((a, b) => a - b);
  /** How many of `sorted` are below `t`. */
  const before = (sorted: number[], t: number) => {
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid]! < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const mayOverflow = (idf: AnsweredWrites['identify'][number]) =>
    idf.candidates.length >= listLimit || before(linkSends, idf.answeredAt) - before(deletionsDone, idf.sentAt) > listLimit;
  for (const link of w.links) {
    for (const idf of w.identify) {
      if (idf.sentAt <= link.doneAt) continue;
      const deleting = deleteSentAt.get(link.userId);
      if (deleting !== undefined && deleting <= idf.answeredAt) continue; // may be deleted when it searched
      const listed = idf.candidates.includes(link.userId);
      if (!listed && mayOverflow(idf)) {
        fullLists++;
        continue;
      }
      checked++;
      if (!listed) {
        missed++;
        const m = missedUsers.get(link.userId) ?? { userId: link.userId, linkedAt: link.doneAt, missedBy: 0, firstMissSentAt: idf.sentAt };
        m.missedBy++;
        m.firstMissSentAt = Math.min(m.firstMissSentAt, idf.sentAt);
        missedUsers.set(link.userId, m);
      }
      for (const f of faults) {
        if (link.doneAt < f.at && idf.sentAt > f.at) {
          acrossFaults[f.name]!.checked++;
          if (!listed) acrossFaults[f.name]!.missed++;
        }
      }
    }
  }
  return { checked, missed, fullLists, acrossFaults, missedUsers: [...missedUsers.values()] };
}
