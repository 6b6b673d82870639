/** Schemas shared by several routes (TypeBox builds plain JSON Schema, used by AJV and OpenAPI alike). */
import { Type, type TSchema } from '@sinclair/typebox';

export const Strict = { additionalProperties: false } as const;

export const Uuid = Type.String({ format: 'uuid' });
export const IsoDateTime = Type.String({ format: 'date-time' });
export const IsoDate = Type.String({ format: 'date' });

/** A `?from` or `?to` of a report: an ISO date (the whole UTC day) or a date-time (platform/lists/date-range.ts). */
export const DateParam = (description: string) => Type.Union([IsoDate, IsoDateTime], { description });

export const ErrorBody = Type.Object(
  {
    error: Type.String({ description: 'Stable machine-readable code' }),
    message: Type.String({ description: 'Human-readable text' }),
    details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    outcome: Type.Optional(Type.String({ description: 'Face outcome, on verify-face, /identify and /verify/self' })),
    quality: Type.Optional(
      Type.Object(
        { score: Type.Integer(), issues: Type.Array(Type.String()) },
        { description: 'Advisory capture quality (verify-face 422 outcomes of a capture with a face); issue codes as in the 200 answers' },
      ),
    ),
  },
  { $id: 'Error' },
);

export const IdParams = Type.Object({ id: Uuid }, Strict);

/** `?page&pageSize` with the document's defaults (1 and 20, at most 100). */
export const PageQuery = Type.Object(
  {
    page: Type.Integer({ minimum: 1, default: 1 }),
    pageSize: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
  },
  Strict,
);

export const Page = <T extends TSchema>(item: T) =>
  Type.Object({
    items: Type.Array(item),
    page: Type.Integer(),
    pageSize: Type.Integer(),
    total: Type.Integer(),
  });

export const StatusBody = (status: string) => Type.Object({ status: Type.Literal(status) });
