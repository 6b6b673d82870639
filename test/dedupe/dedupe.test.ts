/**
 * One person, one identity (SPEC 12.5) end to end, through HTTP, on real photos with the real face and
 * search workers: the registry simulator holds two persons whose photos show the same human, and a
 * consumer links each. Serial: every test's links land in the one index of this file, in this order.
 *
 * Photos (test/fixtures/faces, PROVENANCE.md): LFW tiles of George W. Bush (1-3) and Colin Powell (1-3).
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { createDeps, closeDeps, type AppDeps } from '../../processes/web/deps.js';
import { startWebProcess, type RunningWebProcess } from '../../processes/web.js';
import { createLogger } from '../../platform/logger.js';
import { freePort } from '../../scripts/lib/private-services.js';
import { useHarness, ROOT } from '../helpers/harness.js';
import { client } from '../helpers/http.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import { ensureFirstAdministrator } from '../../features/staff/service.js';
import { CSP_RECORDER, DESKTOP, cspViolations, launchChromium, screenshots, seriousViolations } from '../helpers/browser.js';

const photo = (f: string) => readFileSync(path.join(ROOT, 'test/fixtures/faces', f));
const IMG = {
  bush1: photo('lfw/Bush_1.png'),
  bush2: photo('lfw/Bush_2.png'),
  bush3: photo('lfw/Bush_3.png'),
  powell1: photo('lfw/Powell_1.png'),
  powell2: photo('lfw/Powell_2.png'),
  powell3: photo('lfw/Powell_3.png'),
  fruit: photo('no_face_fruits.jpg'),
};

interface ExtraWeb {
  url: string;
  deps: AppDeps;
  web: RunningWebProcess;
}
let hardBlock: ExtraWeb;
/** hard-block with a duplicate band no two photographs reach: a second photo of one face is a possible_duplicate. */
let reviewOnly: ExtraWeb;
const h = useHarness(
  test,
  { face: true, search: 1, env: { ADMIN_IDENTIFIER: 'dedupe-admin', ADMIN_PASSWORD: 'dedupe-admin-pass-1' } },
  {
    ready: async (harness) => {
      // Other web processes of the same deployment (database, Redis, workers), other settings.
      const extra = async (env: Record<string, string>): Promise<ExtraWeb> => {
        const config = harness.configFor({ PORT: String(await freePort()), ...env });
        const deps = createDeps(config, { logger: createLogger({ level: 'silent' }) });
        const web = await startWebProcess(deps, { port: config.http.port, poller: false });
        return { url: web.web.url, deps, web };
      };
      hardBlock = await extra({ DEDUPE_POLICY: 'hard-block' });
      reviewOnly = await extra({ DEDUPE_POLICY: 'hard-block', DEDUPE_THRESHOLD: '0.99' });
      const first = await ensureFirstAdministrator(harness.deps);
      if (!first.created) throw new Error(`first administrator not created: ${first.reason}`);
      admin = await newOperator(harness, { role: 'administrator' });
    },
    beforeStop: async () => {
      for (const e of [hardBlock, reviewOnly]) {
        await e.web.close();
        await closeDeps(e.deps);
      }
    },
  },
);
const api = (base = h.url) => client(base);

let seq = 0;
/** A registry person (NIN and BVN) with this photo. */
async function enrol(image: Buffer, name: { firstName: string; lastName: string; dateOfBirth: string; gender: string }): Promise<{ nin: string; bvn: string }> {
  const res = await api().post('/api/enroll', {
    form: { ...name, phone: `+23481${String(++seq).padStart(8, '0')}`, photo: { data: image, filename: 'photo.png', type: 'image/png' } },
  });
  if (res.status !== 201) throw new Error(`enrol failed: ${res.status} ${res.text}`);
  return res.body.person;
}
const BUSH = { firstName: 'George', lastName: 'Bush', dateOfBirth: '1946-07-06', gender: 'male' };
const POWELL = { firstName: 'Colin', lastName: 'Powell', dateOfBirth: '1937-04-05', gender: 'male' };

/** validate → verify-face (a selfie, or the NIN capture reused) → link; the link's answer. */
async function linkWith(token: string, registry: 'nin' | 'bvn', number: string, selfie: Buffer | null, base = h.url) {
  const v = await api(base).post(`/identity/${registry}/validate`, { token, json: { [registry]: number } });
  if (v.status !== 200) throw new Error(`validate: ${v.status} ${v.text}`);
  const f = await api(base).post(`/identity/${registry}/verify-face`, {
    token,
    form: {
      validationToken: v.body.validationToken,
      ...(selfie ? { file: { data: selfie, filename: 'selfie.png', type: 'image/png' } } : { reuseCapture: 'true' }),
    },
  });
  if (f.status !== 200) throw new Error(`verify-face: ${f.status} ${f.text}`);
  return api(base).post(`/identity/${registry}/link`, { token, json: { linkToken: f.body.linkToken } });
}

const casesOf = (userId: string) => h.deps.db('dedupeCases').where({ userId }).orderBy('createdAt');

let admin: { token: string; operatorId: string };
let powellUser: { userId: string; token: string };
let bushUser: { userId: string; token: string };

test.serial('NIN then BVN of one person opens no case; a different human opens none either', async (t) => {
  const powell = await enrol(IMG.powell1, POWELL);
  powellUser = await newConsumer(h);
  t.is((await linkWith(powellUser.token, 'nin', powell.nin, IMG.powell2)).status, 200);
  // The BVN, reusing the NIN capture: the account's own canonical embedding is no duplicate.
  const bvn = await linkWith(powellUser.token, 'bvn', powell.bvn, null);
  t.is(bvn.status, 200, bvn.text);
  t.deepEqual(await casesOf(powellUser.userId), []);

  // Another human: no case.
  const bush = await enrol(IMG.bush1, BUSH);
  bushUser = await newConsumer(h);
  const l = await linkWith(bushUser.token, 'nin', bush.nin, IMG.bush2);
  t.is(l.status, 200, l.text);
  t.deepEqual(await casesOf(bushUser.userId), []);
  t.is(Number((await h.deps.db('dedupeCases').count({ n: '*' }).first())!.n), 0);
});

test.serial('the same human under a second identity links (flag-and-continue) and opens a duplicate case an administrator reviews and decides', async (t) => {
  // A second registry person whose photo is another picture of the same human.
  const other = await enrol(IMG.bush3, { ...BUSH, firstName: 'Walker', dateOfBirth: '1950-01-01' });
  const fraud = await newConsumer(h);
  const l = await linkWith(fraud.token, 'nin', other.nin, IMG.bush2);
  t.is(l.status, 200, l.text);
  // The consumer learns nothing: the answer is the link's usual one.
  t.deepEqual(Object.keys(l.body).sort(), ['linkedAt', 'registry', 'status']);
  t.false(l.text.includes(bushUser.userId));
  t.truthy(await h.deps.db('ninLinks').where({ userId: fraud.userId }).first());

  const [row] = await casesOf(fraud.userId);
  t.truthy(row);
  // The consumer never sees cases (a consumer token is not an operator's: 401); nor does an operator.
  t.is((await api().get('/dedupe/cases', { token: fraud.token })).status, 401);
  t.is((await api().get(`/dedupe/cases/${row.id}`, { token: fraud.token })).status, 401);
  const operator = await newOperator(h);
  t.is((await api().get('/dedupe/cases', { token: operator.token })).status, 403);

  const list = await api().get('/dedupe/cases?status=open&kind=duplicate&page=1&pageSize=10', { token: admin.token });
  t.is(list.status, 200, list.text);
  const listed = list.body.items.find((c: { id: string }) => c.id === row.id);
  t.truthy(listed);
  t.is(listed.kind, 'duplicate');
  t.is(listed.status, 'open');
  t.is(listed.userId, fraud.userId);
  t.is(listed.matchedUserId, bushUser.userId);
  t.is(listed.registry, 'nin');
  t.true(listed.score >= h.config.dedupe.threshold, String(listed.score));
  t.false(listed.blocked);
  t.is((await api().get('/dedupe/cases?status=confirmed', { token: admin.token })).body.total, 0);

  const detail = await api().get(`/dedupe/cases/${row.id}`, { token: admin.token });
  t.is(detail.status, 200, detail.text);
  t.is(detail.body.case.id, row.id);
  t.true(detail.body.case.captureAvailable);
  t.is(detail.body.accounts.matchedUser.userId, bushUser.userId);
  t.is(detail.body.accounts.matchedUser.name, 'G***** B***');
  t.regex(detail.body.accounts.user.nin, /^•+\d{3}$/);
  t.false(detail.text.includes(other.nin));

  // The capture is kept sealed under the case id, and shown to an administrator as a JPEG.
  const sealed = (await h.deps.db('dedupeCases').where({ id: row.id }).first()).captureSealed as Buffer;
  t.false(sealed.includes(Buffer.from([0xff, 0xd8, 0xff])));
  const capture = await fetch(`${h.url}/dedupe/cases/${row.id}/capture`, { headers: { authorization: `Bearer ${admin.token}` } });
  t.is(capture.status, 200);
  t.is(capture.headers.get('content-type'), 'image/jpeg');
  const meta = await sharp(Buffer.from(await capture.arrayBuffer())).metadata();
  t.is(meta.format, 'jpeg');
  t.truthy(await h.deps.db('auditEvents').where({ type: 'dedupe.capture_viewed', subjectId: row.id }).first());

  // Opened: audited and announced in the transaction that opened it.
  const opened = await h.deps.db('auditEvents').where({ type: 'dedupe.case.opened', subjectId: row.id }).first();
  t.is(opened.data.kind, 'duplicate');
  const openedEvent = await h.deps.db('webhookEvents').where({ type: 'dedupe.case.opened' }).whereRaw("data->>'caseId' = ?", [row.id]).first();
  t.deepEqual(openedEvent.data, { caseId: row.id, kind: 'duplicate', userId: fraud.userId, status: 'open' });

  // Decided, with a note: audited, announced, final.
  const decided = await api().patch(`/dedupe/cases/${row.id}`, { token: admin.token, json: { status: 'confirmed', note: 'same man, two NINs' } });
  t.is(decided.status, 200, decided.text);
  t.is(decided.body.case.status, 'confirmed');
  t.is(decided.body.case.decidedBy, admin.operatorId);
  t.is(decided.body.case.note, 'same man, two NINs');
  t.truthy(Date.parse(decided.body.case.decidedAt));
  const audit = await h.deps.db('auditEvents').where({ type: 'dedupe.case.decided', subjectId: row.id }).first();
  t.is(audit.actorId, admin.operatorId);
  t.is(audit.data.to, 'confirmed');
  const decidedEvent = await h.deps.db('webhookEvents').where({ type: 'dedupe.case.decided' }).whereRaw("data->>'caseId' = ?", [row.id]).first();
  t.deepEqual(decidedEvent.data, { caseId: row.id, kind: 'duplicate', userId: fraud.userId, status: 'confirmed' });
  const again = await api().patch(`/dedupe/cases/${row.id}`, { token: admin.token, json: { status: 'dismissed' } });
  t.is(again.status, 409);
  t.is((await api().patch(`/dedupe/cases/${row.id}`, { token: admin.token, json: { status: 'open' } })).status, 400);
  t.is((await api().get('/dedupe/cases/00000000-0000-4000-8000-000000000000', { token: admin.token })).status, 404);

  const metrics = await api().get('/metrics');
  t.regex(metrics.text, /dedupe_cases_opened_total\{kind="duplicate"\} [1-9]/);
  t.regex(metrics.text, /dedupe_case_decisions_total\{status="confirmed"\} [1-9]/);
});

test.serial('hard-block: the same human under another identity is refused 422 duplicate_identity, no link row, a case opens', async (t) => {
  const other = await enrol(IMG.bush1, { ...BUSH, firstName: 'Herbert', dateOfBirth: '1955-05-05' });
  const fraud = await newConsumer(h);
  const l = await linkWith(fraud.token, 'nin', other.nin, IMG.bush2, hardBlock.url);
  t.is(l.status, 422, l.text);
  t.is(l.body.error, 'duplicate_identity');
  t.is(l.body.outcome, 'duplicate_identity');
  t.false(l.text.includes(bushUser.userId));
  t.falsy(await h.deps.db('ninLinks').where({ userId: fraud.userId }).first());
  t.falsy(await h.deps.db('canonicalEmbeddings').where({ userId: fraud.userId }).first());
  const cases = await casesOf(fraud.userId);
  t.true(cases.length >= 1);
  t.true(cases.every((c) => c.blocked));
  t.true(cases.some((c) => c.kind === 'duplicate' && c.matchedUserId === bushUser.userId));
  t.truthy(await h.deps.db('auditEvents').where({ type: 'identity.link_refused', subjectId: fraud.userId }).first());
});

test.serial('a possible_duplicate (another photograph of the face, in the review band) opens a case and never blocks, even under hard-block', async (t) => {
  const other = await enrol(IMG.bush1, { ...BUSH, firstName: 'Prescott', dateOfBirth: '1958-08-08' });
  const user = await newConsumer(h);
  const l = await linkWith(user.token, 'nin', other.nin, IMG.bush3, reviewOnly.url);
  t.is(l.status, 200, l.text);
  t.is(l.body.status, 'linked');
  const cases = await casesOf(user.userId);
  t.true(cases.length >= 1);
  t.true(cases.some((c) => c.matchedUserId === bushUser.userId));
  for (const c of cases) {
    t.is(c.kind, 'possible_duplicate');
    t.false(c.blocked);
    t.true(c.score >= h.config.dedupe.reviewThreshold && c.score < 0.99, String(c.score));
  }
  const listed = await api().get('/dedupe/cases?kind=possible_duplicate', { token: admin.token });
  t.true(listed.body.items.every((c: { kind: string }) => c.kind === 'possible_duplicate'));
  t.true(listed.body.items.some((c: { userId: string }) => c.userId === user.userId));
});

test.serial('the watch-list: an administrator lists a face from a photo; a link with that face opens a watchlist case; removal', async (t) => {
  const noFace = await api().post('/watchlist', {
    token: admin.token,
    form: { reason: 'no face', file: { data: IMG.fruit, filename: 'f.jpg', type: 'image/jpeg' } },
  });
  t.is(noFace.status, 422, noFace.text);
  t.is(noFace.body.error, 'no_face');
  t.is(
    (await api().post('/watchlist', { token: powellUser.token, form: { reason: 'x', file: { data: IMG.powell1, filename: 'p.png', type: 'image/png' } } }))
      .status,
    401,
  );

  const added = await api().post('/watchlist', {
    token: admin.token,
    form: { reason: 'known fraudster', file: { data: IMG.powell3, filename: 'p.png', type: 'image/png' } },
  });
  t.is(added.status, 201, added.text);
  t.deepEqual(Object.keys(added.body.entry).sort(), ['createdAt', 'id', 'reason']);
  t.is(added.body.entry.reason, 'known fraudster');
  const stored = await h.deps.db('watchlistEntries').where({ id: added.body.entry.id }).first();
  t.is(stored.embeddingSealed.length > 2048, true);
  const listed = await api().get('/watchlist', { token: admin.token });
  t.is(listed.status, 200);
  t.true(listed.body.items.some((e: { id: string }) => e.id === added.body.entry.id));

  // Powell under a new identity: a watch-list case (and a duplicate of the Powell account).
  const other = await enrol(IMG.powell3, { ...POWELL, firstName: 'Luther', dateOfBirth: '1960-02-02' });
  const user = await newConsumer(h);
  const l = await linkWith(user.token, 'nin', other.nin, IMG.powell2);
  t.is(l.status, 200, l.text);
  const cases = await casesOf(user.userId);
  const watch = cases.find((c) => c.kind === 'watchlist');
  t.truthy(watch, JSON.stringify(cases.map((c) => c.kind)));
  t.is(watch!.watchlistEntryId, added.body.entry.id);
  const detail = await api().get(`/dedupe/cases/${watch!.id}`, { token: admin.token });
  t.is(detail.body.case.watchlistEntryId, added.body.entry.id);
  t.is(detail.body.watchlistReason, 'known fraudster');
  t.is(detail.body.accounts.matchedUser, null);

  // Removed: 204, then 404; a later link of that face opens no watch-list case.
  t.is((await api().delete(`/watchlist/${added.body.entry.id}`, { token: admin.token })).status, 204);
  t.is((await api().delete(`/watchlist/${added.body.entry.id}`, { token: admin.token })).status, 404);
  t.false((await api().get('/watchlist', { token: admin.token })).body.items.some((e: { id: string }) => e.id === added.body.entry.id));
});

test.serial("a confirmed case's capture joins the watch-list", async (t) => {
  const [confirmed] = await h.deps.db('dedupeCases').where({ status: 'confirmed' });
  t.truthy(confirmed);
  const added = await api().post(`/dedupe/cases/${confirmed.id}/watchlist`, { token: admin.token, json: { reason: 'confirmed duplicate' } });
  t.is(added.status, 201, added.text);
  t.is((await h.deps.db('watchlistEntries').where({ id: added.body.entry.id }).first()).sourceCaseId, confirmed.id);
  const [open] = await h.deps.db('dedupeCases').where({ status: 'open' });
  t.is((await api().post(`/dedupe/cases/${open.id}/watchlist`, { token: admin.token, json: { reason: 'not yet' } })).status, 409);
});

test.serial('GET /watchlist is a list like every other: { items, page, pageSize, total }, paged by ?page&pageSize, newest first', async (t) => {
  // Entries of an engine version no link searches: they only fill the list.
  const base = Date.parse('2030-01-01T00:00:00Z');
  const ids = [0, 1, 2].map((i) => `00000000-0000-4000-8000-00000000000${i}`);
  await h.deps.db('watchlistEntries').insert(
    ids.map((id, i) => ({
      id,
      reason: `paging ${i}`,
      embeddingSealed: Buffer.alloc(16),
      engineVersion: 'paging-only',
      createdAt: new Date(base + i * 1000),
    })),
  );
  try {
    const all = await api().get('/watchlist', { token: admin.token });
    t.is(all.status, 200, all.text);
    t.deepEqual(Object.keys(all.body).sort(), ['items', 'page', 'pageSize', 'total']);
    t.like(all.body, { page: 1, pageSize: 20 });
    t.is(all.body.total, all.body.items.length);
    t.true(all.body.total >= 3);

    // The three newest entries are these, newest first, two a page.
    const first = await api().get('/watchlist?page=1&pageSize=2', { token: admin.token });
    t.is(first.status, 200, first.text);
    t.like(first.body, { page: 1, pageSize: 2, total: all.body.total });
    t.deepEqual(
      first.body.items.map((e: { reason: string }) => e.reason),
      ['paging 2', 'paging 1'],
    );
    t.deepEqual(Object.keys(first.body.items[0]).sort(), ['createdAt', 'id', 'reason']);
    const second = await api().get('/watchlist?page=2&pageSize=2', { token: admin.token });
    t.like(second.body, { page: 2, pageSize: 2, total: all.body.total });
    t.is(second.body.items[0].reason, 'paging 0');
    const beyond = await api().get(`/watchlist?page=${all.body.total + 1}&pageSize=1`, { token: admin.token });
    t.like(beyond.body, { items: [], total: all.body.total });

    for (const bad of ['pageSize=101', 'pageSize=0', 'page=0', 'page=x', 'size=2']) {
      const res = await api().get(`/watchlist?${bad}`, { token: admin.token });
      t.is(res.status, 400, `${bad}: ${res.text}`);
      t.is(res.body.error, 'validation_failed', bad);
    }
  } finally {
    await h.deps.db('watchlistEntries').whereIn('id', ids).del();
  }
});

test.serial('console: an administrator reviews a case (capture, both masked accounts, score and band) and dismisses it with a note', async (t) => {
  const browser = await launchChromium();
  try {
    const context = await browser.newContext({ viewport: DESKTOP, baseURL: h.url, locale: 'en-GB', reducedMotion: 'reduce' });
    await context.addInitScript(CSP_RECORDER);
    const page = await context.newPage();
    page.setDefaultTimeout(30_000);
    await page.goto('/console/#/staff');
    await page.getByLabel('Identifier').fill('dedupe-admin');
    await page.getByLabel('Password').fill('dedupe-admin-pass-1');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Operators' }).waitFor();
    await page.getByRole('button', { name: 'Duplicate identities' }).click();
    await page.getByRole('heading', { name: 'Duplicate identities' }).waitFor();

    // An open duplicate case with a capture: the first row of the (open) list.
    const [open] = await h.deps.db('dedupeCases').where({ status: 'open', kind: 'duplicate' }).whereNotNull('captureSealed').orderBy('createdAt', 'desc');
    t.truthy(open);
    await page.getByLabel('Kind').selectOption('duplicate');
    await page.getByTestId('dedupe-cases').locator('tbody tr').first().getByRole('button').click();
    await page.getByTestId('case-capture').waitFor();
    t.true(await page.getByTestId('case-capture').evaluate((img) => (img as HTMLImageElement).complete && (img as HTMLImageElement).naturalWidth > 0));
    const detail = await api().get(`/dedupe/cases/${open.id}`, { token: admin.token });
    await page.getByTestId('case-matched-user').getByText(detail.body.accounts.matchedUser.name).waitFor();
    await page.getByTestId('case-user').getByText(detail.body.accounts.user.nin).waitFor();
    t.regex((await page.getByTestId('case-score').textContent()) ?? '', /^0\.\d{3}$|^1\.000$/);
    await page.getByRole('heading', { name: /Duplicate \(at or above/ }).waitFor();
    t.deepEqual(await seriousViolations(page), []);
    t.deepEqual(await cspViolations(page), []);
    await screenshots(page, 'admin-dedupe-case', ['desktop']);

    await page.getByLabel('Note').fill('different people, same studio photo');
    await page.getByRole('button', { name: 'Dismiss' }).click();
    await page
      .getByTestId('case-decision')
      .getByText(/dismissed.*different people/)
      .waitFor();
    const decided = await h.deps.db('dedupeCases').where({ id: open.id }).first();
    t.is(decided.status, 'dismissed');
    t.is(decided.note, 'different people, same studio photo');
    await context.close();
  } finally {
    await browser.close();
  }
});
