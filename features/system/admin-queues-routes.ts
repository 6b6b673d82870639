/**
 * Bull Board at /admin/queues, administrators only. A browser cannot send a bearer header, so an
 * administrator first POSTs /admin/queues/session with their bearer token and receives a short-lived
 * (15 min), HttpOnly, SameSite=Strict cookie scoped to /admin/queues. Every board request re-checks
 * that cookie's session and the administrator's current state.
 */
import type { SetOption } from 'cookies';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import type { TokenService } from '../sign-in/index.js';
import type { Config } from '../../platform/config.js';

export const ADMIN_UI_BASE = '/admin/queues';
export const ADMIN_UI_COOKIE = 'faceid_admin_ui';
const COOKIE_TTL_SECONDS = 900;

function cookieOptions(ttlSeconds: number, secure: boolean): SetOption {
  return { httpOnly: true, sameSite: 'strict', path: ADMIN_UI_BASE, maxAge: ttlSeconds * 1000, secure, overwrite: true };
}

export function adminQueueRoutes(deps: { config: Config; tokens: TokenService }): AnyRoute[] {
  return [
    route({
      method: 'POST',
      path: `${ADMIN_UI_BASE}/session`,
      operationId: 'openQueueDashboardSession',
      tag: 'System',
      summary: 'Issue the short-lived cookie that opens the queue dashboard (Bull Board) in a browser',
      auth: 'administrator',
      responses: { 204: { description: 'Cookie set (HttpOnly, SameSite=Strict, Path=/admin/queues, 15 minutes)' } },
      handler: async function openQueueDashboardSession({ auth, ctx }) {
        const token = await deps.tokens.signAdminUi(auth.operatorId, auth.sessionId, COOKIE_TTL_SECONDS);
        ctx.cookies.set(ADMIN_UI_COOKIE, token, cookieOptions(COOKIE_TTL_SECONDS, deps.config.isProduction));
        return { status: 204 };
      },
    }),
    route({
      method: 'DELETE',
      path: `${ADMIN_UI_BASE}/session`,
      operationId: 'closeQueueDashboardSession',
      tag: 'System',
      summary: 'Clear the queue dashboard cookie',
      auth: 'none',
      responses: { 204: { description: 'Cookie cleared' } },
      handler: async function closeQueueDashboardSession({ ctx }) {
        ctx.cookies.set(ADMIN_UI_COOKIE, '', cookieOptions(0, deps.config.isProduction));
        return { status: 204 };
      },
    }),
  ];
}
