/**
 * Behind the PostgreSQL proxy of the high-availability layout (HAProxy, docs/deployment.md), while no
 * node is primary the proxy accepts a connection and holds it: node-postgres gives up after its
 * connect timeout with an error that says only "timeout expired". A request meeting it answers 503
 * `dependency_unavailable` (with Retry-After), not 500.
 */
import net from 'node:net';
import test from 'ava';
import { toAppError } from '../platform/http/middleware/errors.js';
import { createDb } from '../platform/database/db.js';

test('a connection the proxy accepts and holds (no primary in service) is a 503, not a 500', async (t) => {
  const held: net.Socket[] = [];
  const proxy = net.createServer((s) => void held.push(s));
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const { port } = proxy.address() as net.AddressInfo;
  const db = createDb(`postgres://postgres@127.0.0.1:${port}/faceid`, 1, { bindModels: false });
  try {
    const err = await t.throwsAsync(db.raw('select 1'));
    const answer = toAppError(err);
    t.is(answer.status, 503);
    t.is(answer.code, 'dependency_unavailable');
  } finally {
    await db.destroy();
    held.forEach((s) => s.destroy());
    proxy.close();
  }
});
