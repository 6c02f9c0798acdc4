import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest } from 'fastify';

export type AccessLogMode = 'off' | 'errors' | 'all';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Path params written to the log as `[redacted]` (e.g. pairing codes, which are never logged). */
    logRedact?: readonly string[];
  }
}

/** Requests slower than this are logged in `errors` mode too. */
const SLOW_MS = 1000;

/**
 * The access log: one line per request (method, path, status, time, request id), written for every
 * request (`all`), or only for failed (status >= 400) and slow ones (`errors`, the default), or never.
 * fastify's default is two lines for every request, which on a cheap route costs about 40% of its
 * throughput; the reverse proxy in front of the service keeps a full access log anyway (see
 * templates/reverse-proxy), correlated by the X-Request-Id this service echoes.
 * The query string is never logged: it can carry codes and tokens; nor are path params a route names
 * in `config.logRedact` (pairing codes).
 */
export class AccessLog extends LogController {
  constructor(private readonly mode: AccessLogMode) {
    super({ requestIdLogLabel: 'requestId' });
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.mode === 'off' && !error) return;
    const status = reply.statusCode;
    const ms = Math.round(reply.elapsedTime * 10) / 10;
    if (this.mode === 'errors' && !error && status < 400 && ms < SLOW_MS) return;
    // The root logger with the id inline: no per-request child logger is built just for this line.
    const line = { requestId: request.id, method: request.method, path: loggedPath(request), status, ms };
    const log = request.server.log;
    if (error || status >= 500) log.error({ ...line, ...(error ? { err: error } : {}) }, 'request failed');
    else log.info(line, 'request completed');
  }
}

/** The request's path without its query string, with the route's `logRedact` params blanked out. */
function loggedPath(request: FastifyRequest): string {
  const redact = request.routeOptions.config?.logRedact;
  const pattern = request.routeOptions.url;
  if (!redact || !pattern) return request.url.split('?', 1)[0];
  // Rebuilt from the route's pattern, so how the client spelled the secret segment does not matter.
  const params = (request.params ?? {}) as Record<string, string | undefined>;
  return pattern.replace(/:(\w+)/g, (_, name: string) => (redact.includes(name) ? '[redacted]' : encodeURIComponent(params[name] ?? '')));
}

type LogFn = (...args: unknown[]) => void;

/**
 * fastify builds a child logger (bindings serialised) for every request, though most requests log
 * nothing but their access line. This stands in for it and builds it on the first real log call.
 * A plain class, not a Proxy: it is allocated per request, and fastify checks its methods each time.
 */
class LazyChildLogger {
  #real: FastifyBaseLogger | undefined;
  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Record<string, unknown>,
    private readonly options: object,
  ) {}
  get real(): FastifyBaseLogger {
    return (this.#real ??= this.parent.child(this.bindings, this.options));
  }
  get level(): string {
    return this.#real?.level ?? this.parent.level;
  }
  set level(value: string) {
    this.real.level = value;
  }
  fatal(...a: unknown[]) {
    (this.real.fatal as LogFn)(...a);
  }
  error(...a: unknown[]) {
    (this.real.error as LogFn)(...a);
  }
  warn(...a: unknown[]) {
    (this.real.warn as LogFn)(...a);
  }
  info(...a: unknown[]) {
    (this.real.info as LogFn)(...a);
  }
  debug(...a: unknown[]) {
    (this.real.debug as LogFn)(...a);
  }
  trace(...a: unknown[]) {
    (this.real.trace as LogFn)(...a);
  }
  silent() {}
  child(bindings: Record<string, unknown>, options?: object) {
    return this.real.child(bindings, options);
  }
}

export function lazyChildLogger(parent: FastifyBaseLogger, bindings: Record<string, unknown>, options: object): FastifyBaseLogger {
  return new LazyChildLogger(parent, bindings, options) as unknown as FastifyBaseLogger;
}
