/** The slice of pino the core uses; adapters pass a pino logger (or a child of one). */
export interface Logger {
  info(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  error(obj: object | string, msg?: string): void;
  debug(obj: object | string, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

const noop = () => {};
export const silentLogger: Logger = { info: noop, warn: noop, error: noop, debug: noop, child: () => silentLogger };
