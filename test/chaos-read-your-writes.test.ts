/**
 * The HA fault suite's read-your-writes check (chaos/lib/read-your-writes.ts), on made-up answers
 * without running a fault: an /identify answered after a link was answered must list that user,
 * except once the account's deletion may have been applied, answered or not.
 */
import test from 'ava';
import { readYourWrites } from '../chaos/lib/read-your-writes.js';

const identify = (sentAt: number, candidates: string[], answeredAt = sentAt + 500) => ({ referenceId: `r${sentAt}`, sentAt, answeredAt, candidates });

test('a deletion applied but never answered (the retry met 404): the user missing from later /identify answers is not a miss', (t) => {
  // Account A: linked at 1 s; its DELETE sent at 5 s was committed, and the answer was lost with the
  // web host it ran on (the load's retry found the account gone). Account B: linked, never deleted.
  const r = readYourWrites({
    links: [
      { userId: 'A', nin: '1', sentAt: 1_000 - 300, doneAt: 1_000 },
      { userId: 'B', nin: '2', sentAt: 1_000 - 300, doneAt: 1_000 },
    ],
    deletionsSent: [{ userId: 'A', sentAt: 5_000 }],
    identify: [identify(2_000, ['A', 'B']), identify(6_000, ['B']), identify(9_000, ['B']), identify(30_000, ['B'])],
  });
  t.is(r.checked, 5, 'A before its deletion was sent, B throughout');
  t.is(r.missed, 0);
  t.deepEqual(r.missedUsers, []);
});

test('an /identify answered while the deletion was on its way may list the user or not; one sent before the link is not checked', (t) => {
  const r = readYourWrites({
    links: [{ userId: 'A', nin: '1', sentAt: 1_000 - 300, doneAt: 1_000 }],
    deletionsSent: [{ userId: 'A', sentAt: 5_000 }],
    // sent before the link answered; answered after the DELETE was sent (searched before or after it).
    identify: [identify(500, []), identify(4_000, [], 5_200)],
  });
  t.is(r.checked, 0);
  t.is(r.missed, 0);
});

test('a live user missing from an /identify sent after the link was answered is a miss, counted across the fault it straddles', (t) => {
  const r = readYourWrites(
    {
      links: [
        { userId: 'A', nin: '1', sentAt: 1_000 - 300, doneAt: 1_000 },
        { userId: 'B', nin: '2', sentAt: 12_000 - 300, doneAt: 12_000 },
      ],
      deletionsSent: [{ userId: 'A', sentAt: 40_000 }],
      identify: [identify(2_000, ['A']), identify(11_000, []), identify(13_000, ['A']), identify(14_000, ['A', 'B'])],
    },
    [{ name: 'cut the PostgreSQL primary host', at: 10_000 }],
  );
  t.is(r.checked, 6, 'A four times, B twice');
  t.is(r.missed, 2, 'A at 11 s, B at 13 s');
  t.deepEqual(r.acrossFaults, { 'cut the PostgreSQL primary host': { checked: 3, missed: 1 } });
  t.deepEqual(
    r.missedUsers.map((m) => [m.userId, m.missedBy, m.firstMissSentAt]),
    [
      ['A', 1, 11_000],
      ['B', 1, 13_000],
    ],
  );
});

test('a user left out of a list that may not hold every live match is not a miss (same-face ties at the cut); once it can, it is', (t) => {
  // Three accounts with the same face against lists of at most two: whoever is cut is a tie, not a replica behind.
  const r = readYourWrites(
    {
      links: [
        { userId: 'A', nin: '1', sentAt: 700, doneAt: 1_000 },
        { userId: 'B', nin: '2', sentAt: 700, doneAt: 1_000 },
        { userId: 'C', nin: '3', sentAt: 700, doneAt: 1_000 },
      ],
      deletionsSent: [{ userId: 'C', sentAt: 3_500 }],
      deletions: [{ userId: 'C', doneAt: 4_000 }],
      identify: [identify(2_000, ['A', 'B']), identify(3_000, ['A']), identify(5_000, ['A'])],
    },
    [],
    2,
  );
  t.is(r.fullLists, 2, 'C against the full list at 2 s; B at 3 s, when three may be live (C then already being deleted)');
  t.is(r.checked, 5, 'A and B at 2 s, A at 3 s, A and B at 5 s (C deleted by then)');
  t.is(r.missed, 1, 'B at 5 s: two live, a list of two, and B left out');
  t.deepEqual(
    r.missedUsers.map((m) => [m.userId, m.firstMissSentAt]),
    [['B', 5_000]],
  );
});
