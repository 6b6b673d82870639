/** The queue dashboard itself (Bull Board), behind the administrator cookie of features/system/admin-queues-routes.ts. */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { KoaAdapter } from '@bull-board/koa';
import type { Middleware } from 'koa';
import { AppError } from '../../platform/errors.js';
import { QUEUE_NAMES } from '../../platform/jobs/index.js';
import type { Config } from '../../platform/config.js';
import type { JobClient } from '../../platform/face-path/job-client.js';
import type { Authorizer, TokenService } from '../sign-in/index.js';
import { ADMIN_UI_BASE, ADMIN_UI_COOKIE } from './admin-queues-routes.js';

/**
 * The page security headers of every answer under the board: its scripts, styles and data from this
 * origin only, never framed. Bull Board's page has inline `style` attributes and a `<style>` element
 * (hence 'unsafe-inline' for styles only, never for scripts), a `<base href>` (hence base-uri 'self'),
 * and a JSON `<script type="application/json">` that is read, not run. Its Google Fonts stylesheet is
 * not allowed: an administrator's page loads nothing from a third party (the fonts fall back).
 */
export const QUEUE_DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The guard and the board itself, mounted before the API router. */
export function adminQueuesMiddleware(deps: { jobs: JobClient; tokens: TokenService; authorizer: Authorizer; config: Config }): Middleware {
  const serverAdapter = new KoaAdapter();
  serverAdapter.setBasePath(ADMIN_UI_BASE);
  createBullBoard({
    // Read-only (QUEUE_DASHBOARD_READ_ONLY, on in production): looking at the queues, never changing them.
    queues: QUEUE_NAMES.map((name) => new BullMQAdapter(deps.jobs.queue(name), { readOnlyMode: deps.config.queueDashboard.readOnly })),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'faceid queues' } },
  });
  const board = serverAdapter.registerPlugin({ mount: ADMIN_UI_BASE });
  const sessionPath = `${ADMIN_UI_BASE}/session`;

  return async (ctx, next) => {
    if (!(ctx.path === ADMIN_UI_BASE || ctx.path.startsWith(`${ADMIN_UI_BASE}/`)) || ctx.path === sessionPath) {
      return next();
    }
    ctx.state.routeTemplate = ADMIN_UI_BASE;
    ctx.set('Content-Security-Policy', QUEUE_DASHBOARD_CSP);
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Referrer-Policy', 'no-referrer');
    const cookie = ctx.cookies.get(ADMIN_UI_COOKIE);
    if (!cookie) throw new AppError('unauthorized', 'Open the dashboard with POST /admin/queues/session first');
    const { sub, sid } = await deps.tokens.verifyAdminUi(cookie);
    // The same "administrator right now" check as every administrator route.
    await deps.authorizer.operatorNow(sub, sid, 'administrator');
    await board(ctx, next);
  };
}
