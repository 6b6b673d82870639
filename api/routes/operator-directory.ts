/** The operator directory for administrators: GET /operators (paging, filters) and GET /operators/{id}. */
import { Type } from '@sinclair/typebox';
import { route, type AnyRoute } from '../route-table.js';
import { Page, PageQuery, Strict } from '../schemas/common.js';
import type { RouteDeps } from './index.js';
import { OperatorBody } from './operators.js';

const ListOperatorsQuery = Type.Object(
  {
    ...PageQuery.properties,
    role: Type.Optional(Type.Union([Type.Literal('operator'), Type.Literal('administrator')])),
    status: Type.Optional(Type.Union([Type.Literal('active'), Type.Literal('deactivated')])),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 120, description: 'Substring of the identifier or the display name (case-insensitive)' })),
  },
  Strict,
);

export default function operatorDirectoryRoutes({ operators }: RouteDeps): AnyRoute[] {
  return [
    route({
      method: 'GET',
      path: '/operators',
      operationId: 'listOperators',
      tag: 'Operators',
      summary: 'Operators and administrators, newest first, with filters',
      auth: 'administrator',
      query: ListOperatorsQuery,
      responses: { 200: { description: 'A page of operators (never a password hash)', schema: Page(OperatorBody) } },
      handler: async ({ query }) => ({ body: await operators.list(query) }),
    }),
    route({
      method: 'GET',
      path: '/operators/{id}',
      operationId: 'getOperator',
      tag: 'Operators',
      summary: 'One operator',
      auth: 'administrator',
      params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'Operator id (UUID)' }) }, Strict),
      responses: { 200: { description: 'The operator', schema: Type.Object({ operator: OperatorBody }) } },
      errors: ['not_found'],
      handler: async ({ params }) => ({ body: { operator: (await operators.get(params.id)).toPublic() } }),
    }),
  ];
}
