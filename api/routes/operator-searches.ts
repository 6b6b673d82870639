/**
 * GET /identify/mine: an operator's own /identify calls (the search desk's "your past searches"). The
 * administrators' GET /operators/{id}/sessions shows the same rows of any operator; this one is scoped
 * to the caller by the token, so an operator never names an id.
 */
import { AppError } from '../../shared/errors.js';
import { route, type AnyRoute } from '../route-table.js';
import { Page, PageQuery } from '../schemas/common.js';
import type { RouteDeps } from './index.js';
import { SearchLogBody } from './operators.js';

export default function operatorSearchRoutes({ operators }: RouteDeps): AnyRoute[] {
  return [
    route({
      method: 'GET',
      path: '/identify/mine',
      operationId: 'listMyIdentifications',
      tag: 'Verification',
      summary: "The caller's own /identify calls: full SearchLog rows, newest first",
      auth: 'operator',
      query: PageQuery,
      responses: { 200: { description: 'A page of SearchLog rows', schema: Page(SearchLogBody) } },
      handler: async ({ auth, query }) => {
        if (auth.kind !== 'operator') throw new AppError('unauthorized', 'An operator token is required');
        return { body: await operators.searchLogs(auth.operatorId, query) };
      },
    }),
  ];
}
