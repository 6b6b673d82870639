/**
 * The index's compact id table (features/search/worker/id-table.ts): the same answers as a Map of
 * strings through appends, removals, re-adds and growth past several rehashes; ids that are not UUIDs
 * refused.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { IdTable, IdTableError, idTableOf } from '../../features/search/worker/id-table.js';

test('positions, removals and re-adds answer as a Map of strings, across growth', (t) => {
  const base = Array.from({ length: 1000 }, () => randomUUID());
  const table = idTableOf(base);
  const map = new Map(base.map((id, p) => [id, p]));
  const at: (string | null)[] = [...base];
  let seed = 7;
  const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  for (let step = 0; step < 20_000; step++) {
    const live = [...map.keys()];
    if (live.length && rnd(3) === 0) {
      const id = live[rnd(live.length)]!;
      t.true(table.bury(map.get(id)!));
      at[map.get(id)!] = null;
      map.delete(id);
    } else {
      // a new user, or a live one moving to a new position (buried first, as the engine does)
      const id = live.length && rnd(4) === 0 ? live[rnd(live.length)]! : randomUUID();
      if (map.has(id)) {
        table.bury(map.get(id)!);
        at[map.get(id)!] = null;
      }
      const p = table.add(id.toUpperCase());
      map.set(id, p);
      at[p] = id;
    }
  }
  t.is(table.size, map.size);
  t.is(table.length, at.length);
  for (const [id, p] of map) t.is(table.position(id), p);
  for (let p = 0; p < at.length; p++) t.is(table.userAt(p), at[p]!);
  t.is(table.position(randomUUID()), -1);
  t.is(table.baseIds.length, 1000 * 16, 'the snapshot part is kept as it was');
});

test('ids that are not UUIDs, and a user listed twice, are refused', (t) => {
  t.throws(() => idTableOf(['u1']), { instanceOf: IdTableError });
  const id = randomUUID();
  t.throws(() => idTableOf([id, id]), { instanceOf: IdTableError, message: /twice/ });
  const table = new IdTable();
  table.add(id);
  t.throws(() => table.add(id), { instanceOf: IdTableError });
});
