/**
 * The registry simulator under /api, through HTTP against its real PostgreSQL table: enrolment and the
 * numbers it issues, lookups with and without the photo, name search, dashboard counts, and the fault
 * injection that lets the service's 502 be exercised for real.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { useHarness, ROOT } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { effectiveFault } from '../../features/registry-simulator/simulator.js';

const FACES = path.join(ROOT, 'test/fixtures/faces');
const bush = readFileSync(path.join(FACES, 'lfw/Bush_1.png'));
const hopper = readFileSync(path.join(FACES, 'grace_hopper_a.jpg'));

const h = useHarness(test);
const faulty = useHarness(test, { env: { REGISTRY_SIM_FAULT: 'error' } });

let seq = 0;
function enrolForm(over: Record<string, string> = {}, photo: Buffer | null = bush, photoType = 'image/png') {
  const form: Record<string, string | { data: Buffer; filename?: string; type?: string }> = {
    firstName: 'George',
    middleName: 'Walker',
    lastName: `Bush${++seq}`,
    dateOfBirth: '1946-07-06',
    gender: 'male',
    ...over,
  };
  if (photo) form.photo = { data: photo, filename: 'photo', type: photoType };
  return form;
}

test('enrol issues an unused 11-digit NIN and BVN by default and answers 201 { person } without the photo', async (t) => {
  const res = await client(h.url).post('/api/enroll', { form: enrolForm({ phone: '+2348031234567' }) });
  t.is(res.status, 201, res.text);
  const p = res.body.person;
  t.regex(p.nin, /^[1-9][0-9]{10}$/);
  t.regex(p.bvn, /^22[0-9]{9}$/);
  t.is(p.firstName, 'George');
  t.is(p.middleName, 'Walker');
  t.is(p.dateOfBirth, '1946-07-06');
  t.is(p.gender, 'male');
  t.is(p.phone, '+2348031234567');
  t.false('photo' in p);
  t.truthy(Date.parse(p.enrolledAt));
});

test('enrol with issue=nin or issue=bvn issues only that number; numbers are never reused', async (t) => {
  const api = client(h.url);
  const onlyNin = await api.post('/api/enroll', { form: enrolForm({ issue: 'nin', gender: 'F' }) });
  t.is(onlyNin.status, 201);
  t.regex(onlyNin.body.person.nin, /^[0-9]{11}$/);
  t.false('bvn' in onlyNin.body.person);
  t.is(onlyNin.body.person.gender, 'female');
  const onlyBvn = await api.post('/api/enroll', { form: enrolForm({ issue: 'bvn' }) });
  t.is(onlyBvn.status, 201);
  t.regex(onlyBvn.body.person.bvn, /^[0-9]{11}$/);
  t.false('nin' in onlyBvn.body.person);

  const many = await Promise.all(Array.from({ length: 10 }, () => api.post('/api/enroll', { form: enrolForm() })));
  const numbers = many.flatMap((r) => [r.body.person.nin, r.body.person.bvn]);
  t.true(many.every((r) => r.status === 201));
  t.is(new Set(numbers).size, numbers.length);
});

test('enrol records a NIN or BVN sent as a field (SPEC 9 person fields) and issues the others; a taken number is 409', async (t) => {
  const api = client(h.url);
  const nin = `7${String(Date.now()).slice(-10)}`;
  const given = await api.post('/api/enroll', { form: enrolForm({ nin, issue: 'nin' }) });
  t.is(given.status, 201, given.text);
  t.is(given.body.person.nin, nin);
  t.false('bvn' in given.body.person);
  t.is((await api.get(`/api/nin/${nin}`)).body.id, given.body.person.id);
  // issue defaults to both: the BVN sent is kept, a NIN is issued.
  const bvn = `22${String(Date.now()).slice(-9)}`;
  const withBvn = await api.post('/api/enroll', { form: enrolForm({ bvn }) });
  t.is(withBvn.status, 201, withBvn.text);
  t.is(withBvn.body.person.bvn, bvn);
  t.regex(withBvn.body.person.nin, /^[0-9]{11}$/);
  const taken = await api.post('/api/enroll', { form: enrolForm({ nin }) });
  t.is(taken.status, 409);
  t.is(taken.body.error, 'conflict');
  const short = await api.post('/api/enroll', { form: enrolForm({ bvn: '123' }) });
  t.is(short.status, 400);
  t.is(short.body.error, 'validation_failed');
});

test('enrol rejects a missing photo, a non-image photo, a bad date, a bad issue and unknown fields', async (t) => {
  const api = client(h.url);
  const noPhoto = await api.post('/api/enroll', { form: enrolForm({}, null) });
  t.is(noPhoto.status, 400);
  t.is(noPhoto.body.error, 'validation_failed');

  const notImage = await api.post('/api/enroll', { form: enrolForm({}, Buffer.from('definitely not a picture'), 'image/jpeg') });
  t.is(notImage.status, 400);
  t.is(notImage.body.error, 'invalid_image');

  for (const over of <Record<string, string>[]>[
    { dateOfBirth: '1946-02-30' },
    { dateOfBirth: '06/07/1946' },
    { dateOfBirth: '2999-01-01' },
    { issue: 'passport' },
    { nickname: 'W' },
    { firstName: ' ' },
    { gender: 'x' },
  ]) {
    const res = await api.post('/api/enroll', { form: enrolForm(over) });
    t.is(res.status, 400, JSON.stringify(over));
    t.is(res.body.error, 'validation_failed', JSON.stringify(over));
  }
  const json = await api.post('/api/enroll', { json: { firstName: 'A' } });
  t.is(json.status, 415);
});

test('GET /api/nin and /api/bvn find the person; the photo only with includePhoto=true', async (t) => {
  const api = client(h.url);
  const { body } = await api.post('/api/enroll', {
    form: enrolForm({ firstName: 'Grace', middleName: '', lastName: 'Hopper', dateOfBirth: '1906-12-09', gender: 'female' }, hopper, 'image/jpeg'),
  });
  const { nin, bvn } = body.person;

  const byNin = await api.get(`/api/nin/${nin}`);
  t.is(byNin.status, 200);
  t.is(byNin.body.nin, nin);
  t.is(byNin.body.bvn, bvn);
  t.is(byNin.body.firstName, 'Grace');
  t.false('middleName' in byNin.body);
  t.false('photo' in byNin.body);
  t.false('photoMime' in byNin.body);

  const withPhoto = await api.get(`/api/bvn/${bvn}?includePhoto=true`);
  t.is(withPhoto.status, 200);
  t.is(withPhoto.body.nin, nin);
  t.is(withPhoto.body.photoMime, 'image/jpeg');
  t.true(Buffer.from(withPhoto.body.photo, 'base64').equals(hopper));

  const without = await api.get(`/api/bvn/${bvn}?includePhoto=false`);
  t.false('photo' in without.body);
});

test('lookups answer 404 not_found for an unknown number and 400 validation_failed unless exactly 11 digits', async (t) => {
  const api = client(h.url);
  for (const kind of ['nin', 'bvn']) {
    const missing = await api.get(`/api/${kind}/00000000000`);
    t.is(missing.status, 404);
    t.is(missing.body.error, 'not_found');
    for (const bad of ['1234567890', '123456789012', '1234567890a', 'abcdefghijk']) {
      const res = await api.get(`/api/${kind}/${bad}`);
      t.is(res.status, 400, `${kind} ${bad}`);
      t.is(res.body.error, 'validation_failed');
    }
    const badQuery = await api.get(`/api/${kind}/00000000000?fields=all`);
    t.is(badQuery.status, 400);
  }
});

test('search is a case-insensitive, paged substring search over the full name', async (t) => {
  const api = client(h.url);
  const surname = `Okonkwo${Date.now()}`;
  for (const first of ['Chinua', 'Chidi', 'Ada']) {
    t.is((await api.post('/api/enroll', { form: enrolForm({ firstName: first, middleName: 'Nnamdi', lastName: surname }) })).status, 201);
  }
  const all = await api.get(`/api/search?name=${surname.toUpperCase()}`);
  t.is(all.status, 200);
  t.is(all.body.total, 3);
  t.is(all.body.page, 1);
  t.is(all.body.pageSize, 20);
  t.deepEqual(all.body.items.map((p: { firstName: string }) => p.firstName).sort(), ['Ada', 'Chidi', 'Chinua']);
  t.true(all.body.items.every((p: object) => !('photo' in p)));

  const substring = await api.get(`/api/search?name=${encodeURIComponent(`chi nnamdi ${surname.toLowerCase()}`)}`);
  t.is(substring.body.total, 2);
  const wholeName = await api.get(`/api/search?name=${encodeURIComponent(`Ada Nnamdi ${surname}`)}`);
  t.is(wholeName.body.total, 1);

  const page2 = await api.get(`/api/search?name=${surname}&page=2&pageSize=2`);
  t.is(page2.body.total, 3);
  t.is(page2.body.items.length, 1);
  t.is(page2.body.page, 2);
  t.is(page2.body.pageSize, 2);

  const wildcard = await api.get('/api/search?name=%25');
  t.is(wildcard.body.total, 0);
  t.is((await api.get('/api/search?pageSize=101')).status, 400);
});

// Serial: the counts must not see the other tests' enrolments (ava runs serial tests first).
test.serial('stats counts persons, NINs, BVNs and enrolments per day', async (t) => {
  const api = client(h.url);
  const before = await api.get('/api/stats');
  t.is(before.status, 200);
  await api.post('/api/enroll', { form: enrolForm({ issue: 'nin' }) });
  await api.post('/api/enroll', { form: enrolForm({ issue: 'both' }) });
  const after = await api.get('/api/stats');
  t.is(after.body.persons - before.body.persons, 2);
  t.is(after.body.nins - before.body.nins, 2);
  t.is(after.body.bvns - before.body.bvns, 1);
  const days = after.body.enrolmentsPerDay as { date: string; count: number }[];
  t.is(days.length, 30);
  const today = new Date().toISOString().slice(0, 10);
  t.is(days.at(-1)!.date, today);
  t.is(days.at(-1)!.count, after.body.persons);
  t.is(
    days.reduce((n, d) => n + d.count, 0),
    after.body.persons,
  );
});

test('X-Registry-Fault: error answers 500 and timeout hangs until the client gives up', async (t) => {
  const api = client(h.url);
  const { body } = await api.post('/api/enroll', { form: enrolForm() });
  const failing = await api.get(`/api/nin/${body.person.nin}`, { headers: { 'X-Registry-Fault': 'error' } });
  t.is(failing.status, 500);
  t.is(typeof failing.body.error, 'string');

  const started = Date.now();
  const outcome = await fetch(`${h.url}/api/nin/${body.person.nin}`, { headers: { 'X-Registry-Fault': 'timeout' }, signal: AbortSignal.timeout(400) }).then(
    (res) => `answered ${res.status}`,
    (e: { name?: string }) => String(e?.name),
  );
  t.is(outcome, 'TimeoutError');
  t.true(Date.now() - started >= 390);

  // The server is not wedged: the next request, without the header, answers at once.
  const ok = await api.get(`/api/nin/${body.person.nin}`);
  t.is(ok.status, 200);
});

test('REGISTRY_SIM_FAULT=error makes every registry route answer 500', async (t) => {
  const api = client(faulty.url);
  t.is((await api.get('/api/nin/12345678901')).status, 500);
  t.is((await api.get('/api/stats')).status, 500);
  t.is((await api.post('/api/enroll', { form: enrolForm() })).status, 500);
  // The per-request header may lift the fault outside production.
  t.is((await api.get('/api/nin/12345678901', { headers: { 'X-Registry-Fault': 'none' } })).status, 404);
});

test('the fault header is honoured only outside production', (t) => {
  t.is(effectiveFault('none', 'timeout', false), 'timeout');
  t.is(effectiveFault('none', 'ERROR', false), 'error');
  t.is(effectiveFault('none', 'timeout', true), 'none');
  t.is(effectiveFault('error', 'none', true), 'error');
  t.is(effectiveFault('none', 'bogus', false), 'none');
});
