/**
 * The one error hierarchy. Every failure a user can cause or meet is one of these; each class carries
 * its HTTP status and a stable machine-readable code. They are mapped in exactly two places:
 * src/http/error-handler.ts (status + JSON body) and src/cli/base-command.ts (message + hint, exit 1).
 */
export interface AppErrorOptions {
  /** Overrides the class's default code where the contract names a specific one. */
  code?: string;
  /** What the user can do about it; shown by the CLI, returned by the API. */
  hint?: string;
  /** Structured detail safe to show the caller (never secrets, never internals). */
  details?: unknown;
  /** Extra top-level fields of the API body where the contract names them (e.g. `detail`). */
  fields?: Record<string, unknown>;
  /**
   * The contract fixes the whole body (SPEC.md: `{ "error": "invalid token" }`): the API answers exactly
   * `{ error: code }`, the request id only in X-Request-Id. The CLI still shows message and hint.
   */
  exactBody?: boolean;
  /** HTTP headers of the answer where a status has one (Retry-After with a 429). */
  headers?: Record<string, string>;
  cause?: unknown;
}

export abstract class AppError extends Error {
  abstract readonly status: number;
  readonly code: string;
  readonly hint?: string;
  readonly details?: unknown;
  readonly fields?: Record<string, unknown>;
  readonly exactBody: boolean;
  readonly headers?: Record<string, string>;

  constructor(message: string, defaultCode: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? defaultCode;
    this.hint = options.hint;
    this.details = options.details;
    this.fields = options.fields;
    this.exactBody = options.exactBody ?? false;
    this.headers = options.headers;
  }
}

export class ValidationError extends AppError {
  readonly status = 400;
  constructor(message: string, options?: AppErrorOptions) {
    super(message, 'validation_failed', options);
  }
}

/** Runs a pure check that throws a plain message; its refusal becomes a 400 naming the field. */
export function checkedField<T>(field: string, check: () => T): T {
  try {
    return check();
  } catch (err) {
    throw new ValidationError((err as Error).message, { details: { field } });
  }
}

export class UnauthenticatedError extends AppError {
  readonly status = 401;
  constructor(message = 'authentication required', options?: AppErrorOptions) {
    super(message, 'unauthenticated', options);
  }
}

export class ForbiddenError extends AppError {
  readonly status = 403;
  constructor(message = 'permission denied', options?: AppErrorOptions) {
    super(message, 'forbidden', options);
  }
}

/** Also used for objects of another tenant or user: their existence is never confirmed. */
export class NotFoundError extends AppError {
  readonly status = 404;
  constructor(message = 'not found', options?: AppErrorOptions) {
    super(message, 'not_found', options);
  }
}

export class ConflictError extends AppError {
  readonly status = 409;
  constructor(message: string, options?: AppErrorOptions) {
    super(message, 'conflict', options);
  }
}

export class PayloadTooLargeError extends AppError {
  readonly status = 413;
  constructor(message: string, options?: AppErrorOptions) {
    super(message, 'payload_too_large', options);
  }
}

/** Well-formed, but its content is refused (a shared memory that reads like instructions to a model). */
export class UnprocessableError extends AppError {
  readonly status = 422;
  constructor(message: string, options?: AppErrorOptions) {
    super(message, 'unprocessable', options);
  }
}

/** The request names a host this service does not answer for (the Host check of local demo mode). */
export class MisdirectedRequestError extends AppError {
  readonly status = 421;
  constructor(message: string, options?: AppErrorOptions) {
    super(message, 'misdirected_request', options);
  }
}

export class RateLimitedError extends AppError {
  readonly status = 429;
  constructor(message: string, options?: AppErrorOptions) {
    super(message, 'rate_limited', options);
  }
}

/** A dependency outside our process (chat platform, identity provider, runtime) failed. */
export class UpstreamError extends AppError {
  readonly status = 502;
  constructor(message: string, options?: AppErrorOptions) {
    super(message, 'upstream_failed', options);
  }
}

/** The service cannot do this right now (database down, runtime not ready); retrying later may work. */
export class UnavailableError extends AppError {
  readonly status = 503;
  constructor(message: string, options?: AppErrorOptions) {
    super(message, 'unavailable', options);
  }
}

export interface ConfigProblem {
  variable: string;
  message: string;
}

/** The configuration is unusable. Carries every problem found, not just the first. */
export class ConfigError extends AppError {
  readonly status = 500;
  readonly problems: ConfigProblem[];
  constructor(problems: ConfigProblem[], options: AppErrorOptions = {}) {
    super(
      `invalid configuration (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n` +
        problems.map((p) => `  - ${p.variable}: ${p.message}`).join('\n'),
      'config_invalid',
      { hint: 'Fix the variables above in the config file or the environment (see `npx aws config show`).', ...options },
    );
    this.problems = problems;
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
