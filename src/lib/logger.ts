import { pino, type Logger as PinoLogger, type DestinationStream } from 'pino';

/**
 * Structured JSON logs. Anything that may carry a credential is redacted by path, so a secret that
 * reaches a log call by mistake is still not written.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'req.headers["x-telegram-bot-api-secret-token"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.token',
  '*.botToken',
  '*.apiKey',
  '*.secret',
  '*.jwtSecret',
  '*.encryptionKey',
  '*.clientSecret',
  '*.code',
];

export function createLogger(level: string, destination?: DestinationStream | number): PinoLogger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    typeof destination === 'number' ? pino.destination({ dest: destination, sync: true }) : destination,
  );
}
