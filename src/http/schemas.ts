import { Type } from '@sinclair/typebox';

/** The error envelope every route may answer with (see error-handler.ts). */
export const ErrorBody = Type.Object(
  {
    error: Type.String({ description: 'Stable machine-readable code, e.g. not_found, forbidden, validation_failed' }),
    message: Type.Optional(Type.String()),
    hint: Type.Optional(Type.String()),
    details: Type.Optional(Type.Unknown()),
    requestId: Type.Optional(Type.String()),
  },
  { $id: 'ErrorBody', additionalProperties: true },
);

export const errorResponses = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [s, Type.Ref(ErrorBody)]));

/** A timestamp: services return Dates, the serialiser writes ISO 8601 strings. */
export const DateTime = Type.Unsafe<Date | string>({ type: 'string', format: 'date-time' });
