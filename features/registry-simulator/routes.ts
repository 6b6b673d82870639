/**
 * The identity registry simulator under /api (SPEC section 9). It is a separate system that happens to
 * be mounted on the web server: no token, its own persons table, reached by the service only over HTTP
 * at REGISTRY_URL. Fault injection: REGISTRY_SIM_FAULT, or the `X-Registry-Fault` header outside
 * production, makes every /api route hang (until the client hangs up, at most 60 s) or answer 500.
 */
import { Type } from '@sinclair/typebox';
import type { Context } from 'koa';
import { AppError } from '../../platform/errors.js';
import { route, type AnyRoute } from '../../platform/http/route-table.js';
import { IsoDate, Page, PageQuery, Strict } from '../../platform/http/schemas.js';
import * as registry from './simulator.js';
import type { RegistrySimulator } from './simulator.js';
import type { Config } from '../../platform/config.js';

const TAG = 'Registry simulator';
const Number11 = Type.String({ pattern: '^[0-9]{11}$', description: 'Exactly 11 digits' });
const Name = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' });

export const RegistryPerson = Type.Object({
  id: Type.String({ format: 'uuid' }),
  nin: Type.Optional(Number11),
  bvn: Type.Optional(Number11),
  firstName: Type.String(),
  lastName: Type.String(),
  middleName: Type.Optional(Type.String()),
  dateOfBirth: IsoDate,
  gender: Type.Union([Type.Literal('male'), Type.Literal('female'), Type.Literal('other')]),
  phone: Type.Optional(Type.String()),
  enrolledAt: Type.String({ format: 'date-time' }),
  photo: Type.Optional(Type.String({ description: 'Base64 of the photo; only with `?includePhoto=true`' })),
  photoMime: Type.Optional(Type.String({ description: 'Only with `?includePhoto=true`' })),
});

const EnrolFields = Type.Object(
  {
    nin: Type.Optional(
      Type.String({ pattern: '^[0-9]{11}$', description: 'A NIN to record instead of an issued one (11 digits; 409 `conflict` when enrolled already)' }),
    ),
    bvn: Type.Optional(
      Type.String({ pattern: '^[0-9]{11}$', description: 'A BVN to record instead of an issued one (11 digits; 409 `conflict` when enrolled already)' }),
    ),
    firstName: Name,
    lastName: Name,
    middleName: Type.Optional(Type.String({ maxLength: 100 })),
    dateOfBirth: Type.String({ format: 'date', description: 'YYYY-MM-DD' }),
    gender: Type.String({
      pattern: '^(male|female|other|Male|Female|Other|MALE|FEMALE|OTHER|M|F|m|f)$',
      description: 'male, female or other (M and F accepted)',
    }),
    phone: Type.Optional(Type.String({ pattern: '^\\+?[0-9]{7,15}$' })),
    issue: Type.Optional(
      Type.Union([Type.Literal('nin'), Type.Literal('bvn'), Type.Literal('both')], {
        default: 'both',
        description: 'Which numbers the person gets (default both); a number sent as `nin` or `bvn` is recorded as sent, the others are issued',
      }),
    ),
  },
  Strict,
);

const LookupQuery = Type.Object(
  { includePhoto: Type.Optional(Type.Boolean({ default: false, description: 'Add the photo (base64) and its MIME type' })) },
  Strict,
);
const SearchQuery = Type.Composite(
  [Type.Object({ name: Type.String({ maxLength: 200, default: '', description: 'Case-insensitive; every word must occur in the full name' }) }), PageQuery],
  Strict,
);
const StatsQuery = Type.Object({ days: Type.Integer({ minimum: 1, maximum: 366, default: 30, description: 'Days of enrolments per day' }) }, Strict);
const StatsBody = Type.Object({
  persons: Type.Integer(),
  nins: Type.Integer(),
  bvns: Type.Integer(),
  enrolmentsPerDay: Type.Array(Type.Object({ date: IsoDate, count: Type.Integer() })),
});

const FAULT_DOC =
  'Fault injection: `REGISTRY_SIM_FAULT=timeout|error`, or the header `X-Registry-Fault: timeout|error` outside production (timeout hangs until the client hangs up, at most 60 s; error answers 500).';

export default function registryRoutes({ config, registrySimulator }: { config: Config; registrySimulator: RegistrySimulator }): AnyRoute[] {
  // The simulator answers only where it is switched on (REGISTRY_SIMULATOR); a real registry is elsewhere.
  if (!config.registry.simulator) return [];
  /** Hangs or fails the request when a fault is configured or requested. */
  const faultGate = async (ctx: Context) => {
    const fault = registry.effectiveFault(config.registry.simFault as registry.Fault, ctx.get('x-registry-fault') || undefined, config.isProduction);
    if (fault === 'none') return;
    const hungUp = new AbortController();
    const onClose = () => hungUp.abort();
    ctx.res.once('close', onClose);
    try {
      await registry.applyFault(fault, hungUp.signal);
    } finally {
      ctx.res.off('close', onClose);
    }
  };

  const lookupRoute = (kind: registry.RegistryKind) =>
    route({
      method: 'GET',
      path: `/api/${kind}/{${kind}}`,
      operationId: kind === 'nin' ? 'registryGetNin' : 'registryGetBvn',
      tag: TAG,
      summary: `Look up a person by 11-digit ${kind.toUpperCase()}`,
      description: `The photo only with \`?includePhoto=true\` (the service's own request). ${FAULT_DOC}`,
      auth: 'none',
      params: Type.Object({ [kind]: Number11 }, Strict),
      query: LookupQuery,
      responses: { 200: { description: 'The person', schema: RegistryPerson } },
      errors: ['not_found', 'internal_error'],
      handler: async function registryGetPerson({ params, query, ctx }) {
        await faultGate(ctx);
        const number = (params as Record<string, string>)[kind]!;
        const person = await registrySimulator.lookup(kind, number, (query as { includePhoto?: boolean }).includePhoto === true);
        if (!person) throw new AppError('not_found', `No person with this ${kind.toUpperCase()}`);
        return { body: person };
      },
    });

  return [
    route({
      method: 'POST',
      path: '/api/enroll',
      operationId: 'registryEnroll',
      tag: TAG,
      summary: 'Enrol a synthetic person and issue an unused 11-digit NIN, BVN or both',
      description: `The person gets a NIN when \`nin\` is sent or \`issue\` is nin or both, a BVN likewise; a number sent is recorded as sent (409 \`conflict\` when another person has it), a missing one is issued. ${FAULT_DOC}`,
      auth: 'none',
      multipart: {
        fields: EnrolFields,
        files: { photo: { required: true, description: 'The registry photo: JPEG, PNG or WebP' } },
      },
      responses: { 201: { description: 'Enrolled', schema: Type.Object({ person: RegistryPerson }) } },
      errors: ['invalid_image', 'conflict', 'internal_error'],
      handler: async function registryEnroll({ fields, files, ctx }) {
        await faultGate(ctx);
        const person = await registrySimulator.enrol({ ...fields, photo: files.photo!.data });
        return { status: 201, body: { person } };
      },
    }),
    lookupRoute('nin'),
    lookupRoute('bvn'),
    route({
      method: 'GET',
      path: '/api/search',
      operationId: 'registrySearch',
      tag: TAG,
      summary: 'Search persons by name (case-insensitive, paged)',
      description: FAULT_DOC,
      auth: 'none',
      query: SearchQuery,
      responses: { 200: { description: 'Persons, without photos', schema: Page(RegistryPerson) } },
      errors: ['internal_error'],
      handler: async function registrySearch({ query, ctx }) {
        await faultGate(ctx);
        return { body: await registrySimulator.search(query.name, query.page, query.pageSize) };
      },
    }),
    route({
      method: 'GET',
      path: '/api/stats',
      operationId: 'registryStats',
      tag: TAG,
      summary: 'Counts for a dashboard: persons, NINs, BVNs, enrolments per day',
      description: FAULT_DOC,
      auth: 'none',
      query: StatsQuery,
      responses: { 200: { description: 'Counts', schema: StatsBody } },
      errors: ['internal_error'],
      handler: async function registryStats({ query, ctx }) {
        await faultGate(ctx);
        return { body: await registrySimulator.stats(query.days) };
      },
    }),
  ];
}
