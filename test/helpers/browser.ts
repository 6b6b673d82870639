/// <reference lib="dom" />
// (The callbacks given to page.evaluate run in the browser.)
/**
 * The browser side of the console tests: Debian's Chromium driven by playwright-core (no downloaded
 * browser), a fake camera fed from a fixture photo, axe-core, and screenshots for docs/console/.
 */
import { createRequire } from 'node:module';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ROOT } from './harness.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const PHONE = { width: 390, height: 844 };
export const DESKTOP = { width: 1280, height: 860 };
/**
 * `npm run screenshots` (UPDATE_SCREENSHOTS=1) writes the committed ones in docs/console/; a plain `npm test`
 * takes the same screenshots into var/console-screenshots/, so a test run leaves the working tree clean.
 */
export const SCREENSHOT_DIR = process.env.UPDATE_SCREENSHOTS === '1' ? path.join(ROOT, 'docs', 'console') : path.join(ROOT, 'var', 'console-screenshots');

/**
 * A Y4M (YUV4MPEG2, 4:2:0) video of a still photo, for Chromium's --use-file-for-fake-video-capture:
 * the camera then "sees" that photo. Frames of width x height (even), BT.601 full-range.
 */
export async function photoToY4m(photo: string, width = 640, height = 480, frames = 2): Promise<string> {
  const frame = await y4mFrame(photo, width, height);
  const file = path.join(mkdtemp(), 'camera.y4m');
  writeFileSync(file, Buffer.concat([Buffer.from(`YUV4MPEG2 W${width} H${height} F15:1 Ip A1:1 C420jpeg\n`), ...Array.from({ length: frames }, () => frame)]));
  return file;
}

/**
 * A Y4M video of several stills, each held for its number of frames, at `fps` frames a second (a
 * liveness challenge filmed: one pose after another), written to `file`.
 */
export async function stillsToY4m(file: string, stills: { photo: string | Buffer; frames: number }[], fps: number, width = 640, height = 480): Promise<void> {
  const parts: Buffer[] = [Buffer.from(`YUV4MPEG2 W${width} H${height} F${fps}:1 Ip A1:1 C420jpeg\n`)];
  for (const still of stills) {
    const frame = await y4mFrame(still.photo, width, height);
    for (let i = 0; i < still.frames; i++) parts.push(frame);
  }
  writeFileSync(file, Buffer.concat(parts));
}

/** One Y4M frame (4:2:0, BT.601 full range) of a photo, as photoToY4m frames it. */
async function y4mFrame(photo: string | Buffer, width: number, height: number): Promise<Buffer> {
  // The photo at the frame's full height, centred on a plain wall in a webcam's 4:3 landscape frame. (An LFW
  // tile is a tight crop of the face; shrunk further, the liveness model no longer passes it.)
  const side = height;
  const wall = { r: 214, g: 221, b: 226 };
  const { data } = await sharp(photo)
    .resize(side, side, { fit: 'cover' })
    .extend({ left: (width - side) / 2, right: (width - side) / 2, top: (height - side) / 2, bottom: (height - side) / 2, background: wall })
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  const w = width;
  const h = height;
  const y = Buffer.alloc(w * h);
  const u = Buffer.alloc((w / 2) * (h / 2));
  const v = Buffer.alloc((w / 2) * (h / 2));
  const clamp = (n: number) => Math.max(0, Math.min(255, Math.round(n)));
  for (let i = 0; i < w * h; i++) {
    const r = data[i * 3]!,
      g = data[i * 3 + 1]!,
      b = data[i * 3 + 2]!;
    y[i] = clamp(0.299 * r + 0.587 * g + 0.114 * b);
  }
  for (let cy = 0; cy < h / 2; cy++) {
    for (let cx = 0; cx < w / 2; cx++) {
      let r = 0,
        g = 0,
        b = 0;
      for (const [dx, dy] of [
        [0, 0],
        [1, 0],
        [0, 1],
        [1, 1],
      ] as const) {
        const p = ((cy * 2 + dy) * w + cx * 2 + dx) * 3;
        r += data[p]!;
        g += data[p + 1]!;
        b += data[p + 2]!;
      }
      r /= 4;
      g /= 4;
      b /= 4;
      u[cy * (w / 2) + cx] = clamp(-0.168736 * r - 0.331264 * g + 0.5 * b + 128);
      v[cy * (w / 2) + cx] = clamp(0.5 * r - 0.418688 * g - 0.081312 * b + 128);
    }
  }
  return Buffer.concat([Buffer.from('FRAME\n'), y, u, v]);
}

export function mkdtemp(): string {
  const dir = path.join(os.tmpdir(), `faceid-console-${process.pid}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

export async function launchChromium(fakeCamera?: string): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      ...(fakeCamera ? ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-video-capture=${fakeCamera}`] : []),
    ],
  });
}

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * axe-core on the page as it is now (WCAG 2.1 A/AA and best practices). The source is evaluated through
 * the DevTools protocol, so the page's CSP (no inline script) stays on. Returns serious/critical violations.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, opts: unknown) => Promise<{ violations: AxeViolation[] }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** A full-page screenshot at phone and at desktop width, into SCREENSHOT_DIR/<name>-{phone,desktop}.png. */
export async function screenshots(page: Page, name: string, widths: ('phone' | 'desktop')[] = ['phone', 'desktop']): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const before = page.viewportSize();
  for (const w of widths) {
    await page.setViewportSize(w === 'phone' ? PHONE : DESKTOP);
    await page.waitForTimeout(150);
    await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}-${w}.png`), fullPage: true, animations: 'disabled', caret: 'hide' });
  }
  if (before) await page.setViewportSize(before);
}

/** Records Content-Security-Policy violations on every page of a context (read with cspViolations). */
export const CSP_RECORDER = `document.addEventListener('securitypolicyviolation', (e) => { (window.__csp ||= []).push(e.violatedDirective + ' ' + e.blockedURI); });`;
export const cspViolations = (page: Page) => page.evaluate(() => (window as unknown as { __csp?: string[] }).__csp ?? []);
