/**
 * SPEC 14.2 "order of checks": a request with a missing or invalid bearer, or one of a session that has
 * ended, is answered 401 before its body is read. Shown with uploads whose body never finishes: the
 * answer can only come before the body was read.
 */
import test from 'ava';
import http from 'node:http';
import { useHarness } from './helpers/harness.js';
import { newConsumer } from './helpers/principals.js';

const h = useHarness(test);

/** Sends the headers and 1 KB of a declared 4 MB multipart body, then nothing more; resolves with the status, or 'no answer'. */
function stalledUpload(path: string, authorization: string | undefined, waitMs = 4_000): Promise<number | 'no answer'> {
  return new Promise((resolve) => {
    const url = new URL(path, h.url);
    const req = http.request(url, {
      method: 'POST',
      headers: {
        'content-type': 'multipart/form-data; boundary=xyz',
        'content-length': String(4 * 1024 * 1024),
        ...(authorization ? { authorization } : {}),
      },
    });
    const timer = setTimeout(() => {
      req.destroy();
      resolve('no answer');
    }, waitMs);
    req.on('response', (res) => {
      clearTimeout(timer);
      res.resume();
      req.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', () => undefined);
    req.write(`--xyz\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n${'x'.repeat(1024)}`);
  });
}

test('uploads to /verify/self and verify-face: 401 before the body is read, for no bearer, a forged one, and an ended session', async (t) => {
  const me = await newConsumer(h);
  await h.deps.db('sessions').where({ id: me.sessionId }).update({ revokedAt: new Date() });
  for (const path of ['/verify/self', '/identity/nin/verify-face', '/identity/bvn/verify-face']) {
    t.is(await stalledUpload(path, undefined), 401, `${path}: no bearer`);
    t.is(await stalledUpload(path, 'Bearer not.a.token'), 401, `${path}: a forged bearer`);
    t.is(await stalledUpload(path, `Bearer ${me.token}`), 401, `${path}: an ended session`);
  }
  // The control: a live session's stalled upload is being read (no answer until its body ends).
  const live = await newConsumer(h);
  t.is(await stalledUpload('/verify/self', `Bearer ${live.token}`, 1_500), 'no answer');
});
