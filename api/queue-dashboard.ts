/** The queue dashboard itself (Bull Board), behind the administrator cookie of api/routes/admin-queues.ts. */
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { KoaAdapter } from '@bull-board/koa';
import type { Middleware } from 'koa';
import { AppError } from '../shared/errors.js';
import { QUEUE_NAMES } from '../shared/jobs/index.js';
import type { AppDeps } from './deps.js';
import { ADMIN_UI_BASE, ADMIN_UI_COOKIE } from './routes/admin-queues.js';

/** The guard and the board itself, mounted before the API router. */
export function adminQueuesMiddleware(deps: AppDeps): Middleware {
  const serverAdapter = new KoaAdapter();
  serverAdapter.setBasePath(ADMIN_UI_BASE);
  createBullBoard({
    queues: QUEUE_NAMES.map((name) => new BullMQAdapter(deps.jobs.queue(name), { readOnlyMode: false })),
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
    const cookie = ctx.cookies.get(ADMIN_UI_COOKIE);
    if (!cookie) throw new AppError('unauthorized', 'Open the dashboard with POST /admin/queues/session first');
    const { sub, sid } = await deps.tokens.verifyAdminUi(cookie);
    const row = await deps.db('sessions as s')
      .join('operators as o', 'o.id', 's.subjectId')
      .where({ 's.id': sid, 's.subjectType': 'operator', 'o.id': sub })
      .first('s.revokedAt', 'o.status', 'o.role', 'o.mustResetPassword');
    if (!row || row.revokedAt) throw new AppError('unauthorized', 'The session has ended');
    if (row.status !== 'active') throw new AppError('operator_deactivated', 'This operator account is deactivated');
    if (row.role !== 'administrator' || row.mustResetPassword) throw new AppError('forbidden', 'Administrators only');
    await board(ctx, next);
  };
}

