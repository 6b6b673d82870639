/** A full /identify SearchLog row, as the administrators' and the operator's own history answer it. */
import { Type } from '@sinclair/typebox';
import { IsoDateTime, Uuid } from '../../platform/http/schemas.js';

export const SearchLogBody = Type.Object(
  {
    referenceId: Uuid,
    id: Uuid,
    kind: Type.Literal('identify'),
    operatorId: Uuid,
    orgId: Type.Union([Type.String(), Type.Null()]),
    userId: Type.Union([Uuid, Type.Null()]),
    outcome: Type.String(),
    candidates: Type.Array(Type.Object({ userId: Uuid, score: Type.Number(), rank: Type.Integer() })),
    matchedUserIds: Type.Array(Uuid),
    topScore: Type.Union([Type.Number(), Type.Null()]),
    latencyMs: Type.Object({
      liveness: Type.Union([Type.Number(), Type.Null()]),
      embed: Type.Union([Type.Number(), Type.Null()]),
      search: Type.Union([Type.Number(), Type.Null()]),
      total: Type.Number(),
    }),
    engineVersion: Type.Union([Type.String(), Type.Null()]),
    errorCode: Type.Union([Type.String(), Type.Null()]),
    qualityScore: Type.Union([Type.Integer(), Type.Null()], { description: 'Capture quality 0..100 of the probe; null without a face' }),
    escalatedAt: Type.Union([IsoDateTime, Type.Null()]),
    escalatedBy: Type.Union([Uuid, Type.Null()]),
    createdAt: IsoDateTime,
  },
  { description: 'A full SearchLog row; `referenceId` repeats `id`' },
);
