/// <reference lib="dom" />
/**
 * The consumer console's liveness challenge end to end, in Debian's Chromium against the real service
 * in-process (PostgreSQL, Redis, the ONNX face worker, the FAISS search worker). The fake camera films
 * a person performing the steps: when the console asks for a session, the test reads the steps the
 * server drew and writes the camera's video (Y4M) to match, one synthesised pose of Bush_2 after another
 * (test/fixtures/faces/liveness, scripts/evaluate/liveness-views.ts), each held while the console
 * waits for it (LivenessCheck's STEP_MS). The console captures, sends, is told `passed`, and links the
 * NIN through verify-face with the session; the registry holds Bush_1.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createApiClient, multipart } from '../console/src/api/client.js';
import { STEP_MS } from '../console/src/consumer/liveness-timing.js';
import { CSP_RECORDER, cspViolations, launchChromium, mkdtemp, PHONE, screenshots, seriousViolations, stillsToY4m } from './helpers/browser.js';
import { ROOT, startHarness, type Harness } from './helpers/harness.js';
import { closeDeps, createDeps } from '../processes/web/deps.js';
import { startWebProcess } from '../processes/web.js';
import { createLogger } from '../platform/logger.js';
import { freePort } from '../scripts/lib/private-services.js';

const PHONE_NUMBER = '+2348035556677';
const faces = (rel: string) => path.join(ROOT, 'test', 'fixtures', 'faces', rel);
const FPS = 2;

let h: Harness;
let browser: Browser;
let camera: string;
let nin: string;

/** The video of a person following `plan`: centre first for 1.5 steps, then each pose for one step, then centre. */
async function filmFollowing(plan: string[]): Promise<void> {
  const perStep = Math.round((STEP_MS / 1000) * FPS);
  const stills = plan.map((step, i) => ({
    photo: faces(`liveness/bush2-${i > 0 && step === 'center' ? 'center2' : step}.jpg`),
    // Frame i is taken about (i + 1) steps after the camera starts: the middle of its pose here.
    frames: i === 0 ? Math.round(perStep * 1.5) : perStep,
  }));
  stills.push({ photo: faces('liveness/bush2-center2.jpg'), frames: perStep * 4 });
  await stillsToY4m(camera, stills, FPS);
}

/** Enrols a registry person with `photo` (a fixture face); their NIN. */
async function enrol(firstName: string, photo: string): Promise<string> {
  const api = createApiClient(h.url, () => '');
  const enrolled = await api.POST(
    '/api/enroll',
    multipart(
      {
        firstName,
        lastName: 'Bush',
        dateOfBirth: '1946-07-06',
        gender: 'male',
        issue: 'both',
        photo: new Blob([new Uint8Array(readFileSync(faces(photo)))], { type: 'image/png' }),
      },
      path.basename(photo),
    ),
  );
  if (!enrolled.data) throw new Error(`enrol: ${JSON.stringify(enrolled.error)}`);
  return enrolled.data.person.nin!;
}

/** The text of the element with `testid`, or '' when there is none (at once: no waiting for it). */
async function textOf(page: Page, testid: string): Promise<string> {
  const el = page.getByTestId(testid);
  return (await el.count()) ? ((await el.first().textContent()) ?? '') : '';
}

test.before(async () => {
  h = await startHarness({ face: true, search: 1 });
  nin = await enrol('George', 'lfw/Bush_1.png');
  camera = path.join(mkdtemp(), 'challenge.y4m');
  await filmFollowing(['center', 'center', 'center']);
  browser = await launchChromium(camera);
});

test.after.always(async () => {
  await browser?.close();
  await h?.stop();
});

function codeFor(phone: string): string {
  const lines = readFileSync(h.outboxFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { to: string; code: string });
  return lines.filter((l) => l.to === phone).pop()!.code;
}

// One flow in serial steps, each well within ava's inactivity timeout on a busy machine.
const flow: { page?: Page; context?: BrowserContext; drawn: string[] } = { drawn: [] };

test.serial('consumer: signs in, validates the NIN', async (t) => {
  t.timeout(300_000);
  const context = await browser.newContext({ viewport: PHONE, baseURL: h.url, locale: 'en-GB', reducedMotion: 'reduce' });
  await context.addInitScript(CSP_RECORDER);
  const page = await context.newPage();
  page.setDefaultTimeout(120_000);
  Object.assign(flow, { page, context });
  // The camera films the steps the server drew for this session, before the console turns it on.
  await page.route('**/liveness/sessions', async (route) => {
    const response = await route.fetch();
    const body = (await response.json()) as { session: { steps: string[]; minFrames: number } };
    flow.drawn = body.session.steps;
    const plan = [...flow.drawn];
    while (plan.length < body.session.minFrames) plan.push('center');
    await filmFollowing(plan);
    await route.fulfill({ response, json: body });
  });
  await page.goto('/console/#/consumer');
  await page.getByLabel('Phone number').fill(PHONE_NUMBER);
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByLabel('6-digit code').waitFor();
  await page.getByLabel('6-digit code').fill(codeFor(PHONE_NUMBER));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Your identity' }).waitFor();
  await page.getByRole('button', { name: 'Link your NIN' }).click();
  await page.getByLabel('Your 11-digit NIN').fill(nin);
  await page.getByRole('button', { name: 'Check number' }).click();
  await page.getByRole('button', { name: 'Start the liveness check' }).waitFor();
  t.pass();
});

test.serial('consumer: the liveness challenge shows each step with an arrow and a line', async (t) => {
  t.timeout(300_000);
  const page = flow.page;
  if (!page) return t.fail('the sign-in step did not run');
  await page.getByRole('button', { name: 'Start the liveness check' }).click();
  const step = page.getByTestId('liveness-step');
  await step.waitFor();
  t.is(await step.getAttribute('data-step'), 'center');
  t.regex((await step.textContent()) ?? '', /●.*Step 1 of \d: Look straight at the camera/);
  t.is(await page.getByRole('button', { name: 'Use a single photo instead' }).count(), 0, 'no other way offered while the check runs');
  t.deepEqual(await seriousViolations(page), []);
  const second = flow.drawn[1];
  if (second) {
    await page.locator(`[data-testid=liveness-step][data-step=${second}]`).waitFor();
    const arrows: Record<string, string> = { turn_left: '←', turn_right: '→', look_up: '↑' };
    t.true(((await step.textContent()) ?? '').includes(arrows[second]!));
    // The page is already at the phone's width: the picture does not disturb the capture. Once the
    // preview plays (a picture taken before its first frame is painted shows a black box).
    await page.waitForFunction(() => {
      const v = document.querySelector('video');
      return !!v && v.readyState >= 2 && v.currentTime > 0.3;
    });
    await screenshots(page, 'consumer-liveness-step', ['phone']);
  }
});

test.serial('consumer: the frames pass, and the session links the NIN through verify-face', async (t) => {
  t.timeout(300_000);
  const page = flow.page;
  if (!page) return t.fail('the challenge step did not run');
  // A passed session goes straight to verify-face (the challenge gives way to its answer): a match, then the link.
  await page.getByTestId('face-match').or(page.getByTestId('link-error')).or(page.getByTestId('liveness-failed')).waitFor({ timeout: 240_000 });
  t.is(await page.getByTestId('liveness-failed').count(), 0, `liveness: ${await textOf(page, 'liveness-failed')}`);
  t.is(await page.getByTestId('link-error').count(), 0, `verify-face: ${await textOf(page, 'link-error')}`);
  await page.getByRole('button', { name: 'Link NIN' }).click();
  await page.getByTestId('linked').waitFor();
  t.deepEqual(await cspViolations(page), []);
  // The frames are gone from the page once sent.
  t.is(await page.locator('video').count(), 0);
  await flow.context?.close();
});

test.serial('consumer, under LIVENESS_MODE=challenge: a single photo is refused, and only the liveness check is offered after', async (t) => {
  t.timeout(300_000);
  // A web process of the same deployment with the challenge policy; the console comes from it too.
  const config = h.configFor({ PORT: String(await freePort()), LIVENESS_MODE: 'challenge' });
  const deps = createDeps(config, { logger: createLogger({ level: 'silent' }) });
  const web = await startWebProcess(deps, { port: config.http.port, poller: false });
  const context = await browser.newContext({ viewport: PHONE, baseURL: web.web.url, locale: 'en-GB', reducedMotion: 'reduce' });
  try {
    const otherNin = await enrol('Georgina', 'lfw/Bush_3.png');
    const phone = '+2348035556678';
    const page = await context.newPage();
    page.setDefaultTimeout(120_000);
    await page.goto('/console/#/consumer');
    await page.getByLabel('Phone number').fill(phone);
    await page.getByRole('button', { name: 'Send me a code' }).click();
    await page.getByLabel('6-digit code').waitFor();
    await page.getByLabel('6-digit code').fill(codeFor(phone));
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Link your NIN' }).click();
    await page.getByLabel('Your 11-digit NIN').fill(otherNin);
    await page.getByRole('button', { name: 'Check number' }).click();
    // The liveness check first; the photo only on request, and the server refuses it under this policy.
    await page.getByRole('button', { name: 'Start the liveness check' }).waitFor();
    await page.getByRole('button', { name: 'Use a single photo instead' }).click();
    await page.locator('input[type=file]').setInputFiles(faces('lfw/Bush_3.png'));
    await page.getByRole('button', { name: 'Compare my face' }).click();
    await page.getByTestId('link-error').getByText('Please take the liveness check instead of a single photo.').waitFor();
    await page.getByRole('button', { name: 'Start the liveness check' }).waitFor();
    t.is(await page.getByRole('button', { name: 'Use a single photo instead' }).count(), 0, 'the refused way is not offered again');
    t.is(await page.locator('input[type=file]').count(), 0);
    t.deepEqual(await seriousViolations(page), []);
  } finally {
    await context.close();
    await web.close();
    await closeDeps(deps);
  }
});

test.serial('the steps in the five languages: every step has its line', async (t) => {
  const { MESSAGES } = await import('../console/src/i18n/index.js');
  for (const [lang, table] of Object.entries(MESSAGES)) {
    for (const s of ['step_center', 'step_turn_left', 'step_turn_right', 'step_look_up', 'liveFail_challenge_not_followed'] as const) {
      t.truthy(table[s], `${lang}: ${s}`);
    }
  }
});
