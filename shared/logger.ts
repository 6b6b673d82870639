/**
 * pino with redaction: bearer tokens, refresh tokens, one-time codes, passwords, single-use tokens,
 * face images and embeddings never reach a log line, whatever object they are nested in.
 */
import pino, { type Logger } from 'pino';

const SENSITIVE_KEYS = [
  'authorization', 'cookie', 'set-cookie', 'password', 'currentPassword', 'newPassword', 'temporaryPassword',
  'passwordHash', 'code', 'otp', 'accessToken', 'refreshToken', 'token', 'proofToken', 'linkToken',
  'validationToken', 'image', 'imageB64', 'alignedFace', 'file', 'photo', 'embedding', 'jpeg', 'probe', 'privateKey', 'jwtPrivateKey',
  'adminPassword',
];

// pino's redact paths: each key at the top level and up to three levels down.
const REDACT_PATHS = SENSITIVE_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]).concat([
  'req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]',
]);

export function createLogger(opts: { level?: string; name?: string; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      name: opts.name,
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination,
  );
}

export type { Logger };
