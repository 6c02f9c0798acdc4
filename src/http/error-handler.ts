import type { FastifyError, FastifyInstance } from 'fastify';
import { isAppError } from '../kernel/errors.js';
import { drainUnreadBody } from './early-response.js';

/**
 * The HTTP mapping of the error hierarchy: every error answers `{ error, message?, requestId }` (plus
 * `hint` and `details` where the error carries them). Unexpected errors are logged in full and answered
 * 500 without internals.
 */
export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
    const requestId = req.id;
    // A client still uploading (401 before the body, 413 at the limit) must be able to read the answer.
    drainUnreadBody(req, reply);
    if (isAppError(err)) {
      if (err.status >= 500) req.log.warn({ err: { code: err.code, message: err.message } }, 'request failed');
      if (err.headers) void reply.headers(err.headers);
      if (err.exactBody) return reply.status(err.status).send({ error: err.code });
      return reply.status(err.status).send({
        ...err.fields,
        error: err.code,
        message: err.message,
        ...(err.hint ? { hint: err.hint } : {}),
        ...(err.details !== undefined ? { details: err.details } : {}),
        requestId,
      });
    }
    if (err.validation) {
      return reply.status(400).send({ error: 'validation_failed', message: err.message, requestId });
    }
    // Fastify's own client errors (bad JSON, unsupported media type, body too large) keep their status.
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return reply.status(err.statusCode).send({ error: clientErrorCode(err.statusCode), message: err.message, requestId });
    }
    req.log.error({ err }, 'unhandled error');
    return reply.status(500).send({ error: 'internal_error', message: 'internal error', requestId });
  });

  app.setNotFoundHandler((req, reply) => {
    drainUnreadBody(req, reply);
    return reply.status(404).send({ error: 'not_found', message: `no route ${req.method} ${req.url.split('?')[0]}`, requestId: req.id });
  });
}

function clientErrorCode(status: number): string {
  switch (status) {
    case 401:
      return 'unauthenticated';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 413:
      return 'payload_too_large';
    case 415:
      return 'unsupported_media_type';
    case 429:
      return 'rate_limited';
    default:
      return 'bad_request';
  }
}
