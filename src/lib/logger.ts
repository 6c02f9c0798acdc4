import { pino, type Logger as PinoLogger, type DestinationStream } from 'pino';

/**
 * Structured JSON logs. Anything that may carry a credential is redacted by path, so a secret that
 * reaches a log call by mistake is still not written.
 */
const REDACT_PATHS = [
  // Exact paths only: pino checks every path on every log call, and wildcards walk every key, which
  // costs measurable throughput on the access log. Code that logs credentials under other names is a
  // bug these paths are not meant to hide.
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["x-telegram-bot-api-secret-token"]',
  'res.headers["set-cookie"]',
  'password',
  'token',
  'botToken',
  'apiKey',
  'secret',
  'jwtSecret',
  'encryptionKey',
  'clientSecret',
  'authorization',
];

/** A JSON logger writing to a file descriptor (1 = stdout, 2 = stderr) or a stream. */
export function createLogger(level: string, destination?: DestinationStream | number): PinoLogger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    // Synchronous writes: nothing is lost when the process dies, and with one access line per failed
    // or slow request (not per request) the volume is low enough that batching buys nothing.
    typeof destination === 'number' ? pino.destination({ dest: destination, sync: true }) : destination,
  );
}

