/// <reference lib="dom" />
/**
 * The consumer console's liveness challenge end to end, in Debian's Chromium against the real service
 * in-process (PostgreSQL, Redis, the ONNX face worker, the FAISS search worker). The camera is a canvas
 * stream injected by an init script in place of getUserMedia: it films a person performing the steps
 * the page shows (one synthesised pose of Bush_2 after another, test/fixtures/faces/liveness,
 * scripts/evaluate/liveness-views.ts) and, while the page shows a light, that person's face tinted by
 * the page's colour (test/helpers/screen-light.ts's reflection) — Chromium's fake camera cannot reflect
 * the screen. So this is a test of the client's flow (it shows the colours, captures under each, sends
 * them in order), not of what a real camera sees. The console captures, sends, is told `passed`, and
 * links the NIN through verify-face with the session; the registry holds Bush_1.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createApiClient, multipart } from '../console/src/api/client.js';
import { STEP_MS } from '../console/src/consumer/liveness-timing.js';
import { CSP_RECORDER, cspViolations, launchChromium, mkdtemp, PHONE, SCREENSHOT_DIR, screenshots, seriousViolations, stillsToY4m } from './helpers/browser.js';
import { ROOT, startHarness, type Harness } from './helpers/harness.js';
import { faceBox, SCREEN_K } from './helpers/screen-light.js';
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
/** What the injected camera films: each pose's JPEG (base64) and the centre frame's face box. */
let film: { poses: Record<string, string>; box: [number, number, number, number]; k: number };

/**
 * Runs in the page before its scripts: getUserMedia answers a canvas stream painting the pose the page
 * asks for (`[data-testid=liveness-step]`, the second centre being `center2`) and, while the page shows
 * a light (`[data-testid=liveness-light]`), the centre face lit by that colour as test/helpers/screen-light.ts
 * lights it (scripts/evaluate/light-sim.ts's model: the face's ellipse in linear light × (1 + k·colour),
 * the room a tenth of that; the page cannot import the module, so the model is repeated here), with a
 * little sensor noise on every frame (the page's JPEGs of identical pictures would be identical bytes).
 */
function injectCamera(arg: { poses: Record<string, string>; box: [number, number, number, number]; k: number }): void {
  const W = 360;
  const H = 480;
  const canvas = document.createElement('canvas');
  canvas.width = W;
  canvas.height = H;
  const ctx = canvas.getContext('2d', { willReadFrequently: true })!;
  const bitmaps: Record<string, ImageBitmap> = {};
  const ready = Promise.all(
    Object.entries(arg.poses).map(async ([name, b64]) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      bitmaps[name] = await createImageBitmap(new Blob([bytes], { type: 'image/jpeg' }));
    }),
  );
  // sRGB byte → linear (0..1), and linear quantised to 4096 steps → sRGB byte.
  const K = arg.k;
  const toLinear = Array.from({ length: 256 }, (_, v) => (v / 255 <= 0.04045 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4));
  const toSrgb = Array.from({ length: 4096 }, (_, i) => {
    const l = i / 4095;
    return Math.round(255 * (l <= 0.0031308 ? 12.92 * l : 1.055 * l ** (1 / 2.4) - 0.055));
  });
  let turned = false;
  let scale = 1;
  let dx = 0;
  const paint = () => {
    const stepEl = document.querySelector('[data-testid=liveness-step]');
    const lightEl = document.querySelector('[data-testid=liveness-light]');
    let pose = stepEl?.getAttribute('data-step') ?? 'center';
    if (pose !== 'center') turned = true;
    else if (turned) pose = 'center2';
    const colour = lightEl?.getAttribute('data-colour') ?? null;
    // The colours the page showed, in order (read by the test).
    const shown = ((window as unknown as { __lightsShown?: string[] }).__lightsShown ??= []);
    if (colour && colour !== shown[shown.length - 1]) shown.push(colour);
    const img = bitmaps[colour ? 'center' : pose] ?? bitmaps.center;
    ctx.fillStyle = '#1d2731';
    ctx.fillRect(0, 0, W, H);
    if (!img) return;
    scale = H / img.height;
    dx = (W - img.width * scale) / 2;
    ctx.drawImage(img, dx, 0, img.width * scale, H);
    // Without a light, no colour added (k 0); sensor noise on every frame either way, as a camera's.
    const c = colour ? [1, 3, 5].map((i) => Number.parseInt(colour.slice(i, i + 2), 16) / 255) : [0, 0, 0];
    const [bx, by, bw, bh] = arg.box;
    const cx = dx + (bx + bw / 2) * scale;
    const cy = (by + bh / 2) * scale;
    const rx = (bw / 2) * scale;
    const ry = (bh / 2) * scale;
    const frame = ctx.getImageData(0, 0, W, H);
    const d = frame.data;
    for (let y = 0; y < H; y++)
      for (let x = 0; x < W; x++) {
        // scripts/evaluate/light-sim.ts `relight`: in linear light, the face × (1 + k·colour), the room a tenth of k.
        const k = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 <= 1 ? K : K * 0.1;
        const o = (y * W + x) * 4;
        for (let ch = 0; ch < 3; ch++) {
          const lit = toSrgb[Math.min(4095, Math.round(toLinear[d[o + ch]!]! * (1 + k * c[ch]!) * 4095))]!;
          d[o + ch] = lit + Math.round((Math.random() - 0.5) * 4);
        }
      }
    ctx.putImageData(frame, 0, 0);
  };
  const stream = canvas.captureStream(15);
  void ready.then(() => setInterval(paint, 66));
  Object.defineProperty(navigator.mediaDevices, 'getUserMedia', {
    configurable: true,
    value: async () => {
      await ready;
      turned = false;
      paint();
      return stream.clone();
    },
  });
}

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
  // The near-copy check off in this deployment: its camera films the same fixture poses in each flow
  // (new bytes, the same pixels), which the check rightly refuses; it is tested in test/liveness/liveness.test.ts.
  h = await startHarness({ face: true, search: 1, env: { LIVENESS_NEAR_REPLAY_WINDOW_SECONDS: '0' } });
  nin = await enrol('George', 'lfw/Bush_1.png');
  film = await filmOf('bush2', SCREEN_K);
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

/**
 * What the injected camera films of the person whose synthesised poses are `stem`'s; `k`: the
 * screen-to-room light ratio at the face (test/helpers/screen-light.ts SCREEN_K; 0: the screen lights
 * nothing).
 */
async function filmOf(stem: string, k: number): Promise<typeof film> {
  const poses = Object.fromEntries(
    ['center', 'center2', 'turn_left', 'turn_right', 'look_up'].map((p) => [p, readFileSync(faces(`liveness/${stem}-${p}.jpg`)).toString('base64')]),
  );
  return { poses, box: (await faceBox(h.deps.face, readFileSync(faces(`liveness/${stem}-center.jpg`)))).box, k };
}

/** The init script installing the camera (as source text: the test's transpiler names functions with a helper, `__name`, the page has not). */
const cameraScript = (arg: typeof film) => ({ content: `var __name = (f) => f; (${injectCamera.toString()})(${JSON.stringify(arg)});` });

/** Signs `phone` in on the consumer page and validates `nin`, up to the offer of the liveness check. */
async function signInAndValidate(page: Page, phone: string, nin: string): Promise<void> {
  await page.goto('/console/#/consumer');
  await page.getByLabel('Phone number').fill(phone);
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByLabel('6-digit code').waitFor();
  await page.getByLabel('6-digit code').fill(codeFor(phone));
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Your identity' }).waitFor();
  await page.getByRole('button', { name: 'Link your NIN' }).click();
  await page.getByLabel('Your 11-digit NIN').fill(nin);
  await page.getByRole('button', { name: 'Check number' }).click();
  await page.getByRole('button', { name: 'Start the liveness check' }).waitFor();
}

// One flow in serial steps, each well within ava's inactivity timeout on a busy machine.
const flow: { page?: Page; context?: BrowserContext; drawn: string[]; lights: string[] } = { drawn: [], lights: [] };

test.serial('consumer: signs in, validates the NIN', async (t) => {
  t.timeout(300_000);
  const context = await browser.newContext({ viewport: PHONE, baseURL: h.url, locale: 'en-GB', reducedMotion: 'reduce' });
  await context.addInitScript(CSP_RECORDER);
  // As source text: the test's transpiler names functions with a helper (`__name`) the page has not.
  await context.addInitScript(cameraScript(film));
  const page = await context.newPage();
  page.setDefaultTimeout(120_000);
  Object.assign(flow, { page, context });
  // What the server drew (the camera follows the page; the test checks the page shows it).
  page.on('response', async (response) => {
    if (response.request().method() === 'POST' && /\/liveness\/sessions$/.test(response.url()) && response.status() === 201) {
      const body = (await response.json()) as { session: { steps: string[]; lights: string[] } };
      flow.drawn = body.session.steps;
      flow.lights = body.session.lights;
    }
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
  // What the light step needs is said before it starts (rendered with the button, waited for: a loaded machine may paint it a frame later).
  await page.getByTestId('liveness-light-hint').waitFor();
  t.regex(await textOf(page, 'liveness-light-hint'), /screen brightness up.*close to the screen/);
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
  // Then the light sequence: the colour over most of the screen (what the camera's face is lit by).
  await page.getByTestId('liveness-light').waitFor({ timeout: 60_000 });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, 'consumer-liveness-light-phone.png'), animations: 'disabled', caret: 'hide' });
  t.regex((await textOf(page, 'liveness-light')) ?? '', /flash a few colours/);
});

test.serial('consumer: the frames pass, and the session links the NIN through verify-face', async (t) => {
  t.timeout(300_000);
  const page = flow.page;
  if (!page) return t.fail('the challenge step did not run');
  // Every colour the server drew was shown, in order (then the frames went with the light frames).
  await page.getByTestId('liveness-light').waitFor({ state: 'detached', timeout: 60_000 });
  t.deepEqual(await page.evaluate(() => (window as unknown as { __lightsShown?: string[] }).__lightsShown ?? []), flow.lights);
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

test.serial('consumer: a face the screen does not light (light_not_followed) is told what to do', async (t) => {
  t.timeout(300_000);
  // The same person and moves, but a camera whose face the screen's colours never reach.
  const context = await browser.newContext({ viewport: PHONE, baseURL: h.url, locale: 'en-GB', reducedMotion: 'reduce' });
  await context.addInitScript(cameraScript(await filmOf('bush2', 0)));
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(120_000);
    await signInAndValidate(page, '+2348035556679', await enrol('Georgette', 'lfw/Bush_2.png'));
    await page.getByRole('button', { name: 'Start the liveness check' }).click();
    const failed = page.getByTestId('liveness-failed');
    await failed.waitFor({ timeout: 240_000 });
    t.regex((await failed.textContent()) ?? '', /screen brightness up.*behind you.*closer to the screen/);
    t.is(await page.getByTestId('face-match').count(), 0);
  } finally {
    await context.close();
  }
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
    for (const s of [
      'step_center',
      'step_turn_left',
      'step_turn_right',
      'step_look_up',
      'liveFail_challenge_not_followed',
      'liveLights',
      'liveLightsHint',
      'liveFail_light_not_followed',
    ] as const) {
      t.truthy(table[s], `${lang}: ${s}`);
    }
  }
});
