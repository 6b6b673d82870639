/// <reference lib="dom" />
/**
 * The console's session in a real browser: the access token is rotated through POST /auth/refresh
 * before it expires, and the page then calls the API with the new one; signing out ends the session
 * on the server (its refresh token is refused afterwards). Access tokens live 30 s here (the minimum).
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { createApiClient } from '../console/src/api/client.js';
import { launchChromium } from './helpers/browser.js';
import { startHarness, type Harness } from './helpers/harness.js';

let h: Harness;
let browser: Browser;

test.before(async () => {
  h = await startHarness({ env: { ACCESS_TOKEN_TTL_SECONDS: '30' } });
  browser = await launchChromium();
});
test.after.always(async () => {
  await browser?.close();
  await h?.stop();
});

test('the page refreshes the access token before it expires, uses the new one, and signing out ends the session', async (t) => {
  const page = await browser.newPage({ baseURL: h.url });
  page.setDefaultTimeout(30_000);
  await page.goto('/console/#/consumer');
  const phone = '+2348035550101';
  await page.getByLabel('Phone number').fill(phone);
  await page.getByRole('button', { name: 'Send me a code' }).click();
  await page.getByLabel('6-digit code').waitFor();
  const line = readFileSync(h.outboxFile, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { to: string; code: string })
    .filter((l) => l.to === phone)
    .pop()!;
  await page.getByLabel('6-digit code').fill(line.code);
  const [signIn] = await Promise.all([page.waitForResponse('**/auth/otp/verify'), page.getByRole('button', { name: 'Sign in' }).click()]);
  const first = (await signIn.json()) as { accessToken: string; refreshToken: string; expiresIn: number };
  t.is(first.expiresIn, 30);
  await page.getByRole('heading', { name: 'Your identity' }).waitFor();

  // 30 s tokens are rotated after 5 s (one minute early, at least 5 s after issue).
  const refresh = await page.waitForResponse('**/auth/refresh', { timeout: 20_000 });
  t.is(refresh.status(), 200);
  t.deepEqual(refresh.request().postDataJSON(), { refreshToken: first.refreshToken });
  const second = (await refresh.json()) as { accessToken: string; refreshToken: string };
  t.not(second.accessToken, first.accessToken);

  const [history] = await Promise.all([page.waitForRequest('**/history?**'), page.getByRole('button', { name: 'History' }).click()]);
  t.is(await history.headerValue('authorization'), `Bearer ${second.accessToken}`);
  t.is((await history.response())?.status(), 200);

  await page.getByRole('button', { name: 'Back' }).click();
  const [logout] = await Promise.all([page.waitForResponse('**/auth/logout'), page.getByRole('button', { name: 'Sign out' }).click()]);
  t.is(logout.status(), 204);
  await page.getByRole('heading', { name: 'Sign in with your phone' }).waitFor();
  // The session is over on the server: the refresh token the page held is refused.
  const after = await createApiClient(h.url).POST('/auth/refresh', { body: { refreshToken: second.refreshToken } });
  t.is(after.response.status, 401);
  t.is(await page.evaluate(() => localStorage.length + sessionStorage.length + document.cookie.length), 0);
});
