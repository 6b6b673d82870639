/**
 * An answer given before the request's body was read (401 before the body, a body that fails to parse
 * part-way) must not leave the rest of that body blocking a kept-alive connection: the next request on
 * the same connection is answered; a large remainder closes the connection with `Connection: close`.
 */
import test from 'ava';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { useHarness } from './helpers/harness.js';
import { newConsumer } from './helpers/principals.js';

const h = useHarness(test);

interface Exchange {
  first: string;
  /** The status line of the answer to a second request sent on the same connection, or null. */
  second: string | null;
}

/** Sends a POST with `body` on a raw connection, then, once its answer's head arrives, GET /health on the same connection. */
function twoOnOneConnection(path: string, headers: Record<string, string>, body: Buffer): Promise<Exchange> {
  return new Promise((resolve) => {
    const url = new URL(h.url);
    const socket = net.connect(Number(url.port), url.hostname);
    let got = '';
    let sentSecond = false;
    const finish = () => {
      clearTimeout(timer);
      socket.destroy();
      const statusLines = got.match(/HTTP\/1\.1 \d{3} [^\r]*/g) ?? [];
      resolve({ first: got.split('\r\n\r\n')[0] ?? '', second: statusLines[1] ?? null });
    };
    const timer = setTimeout(finish, 4_000);
    socket.on('data', (d) => {
      got += d.toString('latin1');
      if (!sentSecond && got.includes('\r\n\r\n')) {
        sentSecond = true;
        socket.write('GET /health HTTP/1.1\r\nHost: faceid\r\n\r\n');
      }
      if ((got.match(/HTTP\/1\.1 \d{3} /g) ?? []).length >= 2) setTimeout(finish, 50);
    });
    socket.on('error', finish);
    socket.on('close', finish);
    const head = Object.entries({ host: 'faceid', 'content-length': String(body.length), ...headers })
      .map(([k, v]) => `${k}: ${v}`)
      .join('\r\n');
    socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n\r\n`);
    socket.write(body);
  });
}

test('a body that fails to inflate part-way: 400, and the connection answers its next request', async (t) => {
  const me = await newConsumer(h);
  const x = await twoOnOneConnection(
    '/disputes',
    { authorization: `Bearer ${me.token}`, 'content-type': 'application/json', 'content-encoding': 'deflate' },
    randomBytes(300_000),
  );
  t.regex(x.first, /^HTTP\/1\.1 400 /);
  t.is(x.second, 'HTTP/1.1 200 OK');
});

test('401 before a 300 KB body is read: the connection answers its next request', async (t) => {
  const x = await twoOnOneConnection('/disputes', { authorization: 'Bearer not.a.token', 'content-type': 'application/json' }, randomBytes(300_000));
  t.regex(x.first, /^HTTP\/1\.1 401 /);
  t.is(x.second, 'HTTP/1.1 200 OK');
});

test('an early answer with more than a megabyte of body unread says Connection: close', async (t) => {
  const x = await twoOnOneConnection('/disputes', { authorization: 'Bearer not.a.token', 'content-type': 'application/json' }, randomBytes(3 * 1024 * 1024));
  t.regex(x.first, /^HTTP\/1\.1 401 /);
  t.regex(x.first, /\r\nConnection: close/i);
  t.is(x.second, null);
});
