/** Preferences (SPEC section 10): defaults, partial strict PATCH without a proofToken, own id only. */
import test from 'ava';
import { useHarness } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';

const h = useHarness(test);

const api = () => client(h.url);

test('a user who never set preferences gets the defaults', async (t) => {
  const me = await newConsumer(h);
  const res = await api().get(`/users/${me.userId}/preferences`, { token: me.token });
  t.is(res.status, 200);
  t.deepEqual(res.body, { notifyChannel: 'sms', language: 'en', marketingOptIn: false });
});

test('PATCH changes only what it is sent, needs no proofToken, persists and is audited', async (t) => {
  const me = await newConsumer(h);
  const first = await api().patch(`/users/${me.userId}/preferences`, { token: me.token, json: { language: 'yo' } });
  t.is(first.status, 200);
  t.deepEqual(first.body, { notifyChannel: 'sms', language: 'yo', marketingOptIn: false });
  const second = await api().patch(`/users/${me.userId}/preferences`, { token: me.token, json: { notifyChannel: 'none', marketingOptIn: true } });
  t.deepEqual(second.body, { notifyChannel: 'none', language: 'yo', marketingOptIn: true });
  t.deepEqual((await api().get(`/users/${me.userId}/preferences`, { token: me.token })).body, second.body);
  const noop = await api().patch(`/users/${me.userId}/preferences`, { token: me.token, json: {} });
  t.deepEqual(noop.body, second.body);
  const audits = await h.deps.db('auditEvents').where({ type: 'preferences.changed', subjectId: me.userId }).orderBy('id');
  t.is(audits.length, 2);
  t.deepEqual(audits[1].data, { notifyChannel: { from: 'sms', to: 'none' }, marketingOptIn: { from: false, to: true } });
});

test('the preferences schema is strict: unknown keys, unknown values and wrong types are 400', async (t) => {
  const me = await newConsumer(h);
  for (const json of [
    { language: 'fr' },
    { notifyChannel: 'email' },
    { marketingOptIn: 'yes' },
    { marketingOptIn: 1 },
    { theme: 'dark' },
    { proofToken: 'x', language: 'ig' },
    { language: 'EN' },
  ]) {
    const res = await api().patch(`/users/${me.userId}/preferences`, { token: me.token, json });
    t.is(res.status, 400, JSON.stringify(json));
    t.is(res.body.error, 'validation_failed');
  }
  for (const language of ['en', 'ha', 'ig', 'yo', 'pcm']) {
    t.is((await api().patch(`/users/${me.userId}/preferences`, { token: me.token, json: { language } })).body.language, language);
  }
  t.deepEqual((await api().get(`/users/${me.userId}/preferences`, { token: me.token })).body, { notifyChannel: 'sms', language: 'pcm', marketingOptIn: false });
});

test("preferences are the subject's own: 403 for another consumer, 401 for an operator or no token", async (t) => {
  const me = await newConsumer(h);
  const other = await newConsumer(h);
  const op = await newOperator(h);
  const read = await api().get(`/users/${other.userId}/preferences`, { token: me.token });
  t.is(read.status, 403);
  t.is(read.body.error, 'forbidden');
  const write = await api().patch(`/users/${other.userId}/preferences`, { token: me.token, json: { language: 'ha' } });
  t.is(write.status, 403);
  t.deepEqual((await api().get(`/users/${other.userId}/preferences`, { token: other.token })).body.language, 'en');
  t.is((await api().get(`/users/${me.userId}/preferences`, { token: op.token })).status, 401);
  t.is((await api().patch(`/users/${me.userId}/preferences`, { json: { language: 'ha' } })).status, 401);
});

test('concurrent partial PATCHes of different fields both land', async (t) => {
  const me = await newConsumer(h);
  await Promise.all([
    api().patch(`/users/${me.userId}/preferences`, { token: me.token, json: { language: 'ig' } }),
    api().patch(`/users/${me.userId}/preferences`, { token: me.token, json: { marketingOptIn: true } }),
    api().patch(`/users/${me.userId}/preferences`, { token: me.token, json: { notifyChannel: 'none' } }),
  ]);
  t.deepEqual((await api().get(`/users/${me.userId}/preferences`, { token: me.token })).body, { notifyChannel: 'none', language: 'ig', marketingOptIn: true });
});
