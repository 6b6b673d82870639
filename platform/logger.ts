/**
 * pino with redaction: bearer tokens, refresh tokens, one-time codes, passwords, single-use tokens,
 * face images and embeddings never reach a log line, whatever object they are nested in.
 */
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

const SENSITIVE_KEYS = [
  'authorization',
  'cookie',
  'set-cookie',
  'password',
  'currentPassword',
  'newPassword',
  'temporaryPassword',
  'passwordHash',
  'code',
  'otp',
  'accessToken',
  'refreshToken',
  'token',
  'proofToken',
  'linkToken',
  'validationToken',
  'image',
  'imageB64',
  'alignedFace',
  'file',
  'photo',
  'embedding',
  'jpeg',
  'probe',
  'privateKey',
  'jwtPrivateKey',
  'adminPassword',
];

// pino's redact paths: each key at the top level and up to three levels down.
const REDACT_PATHS = SENSITIVE_KEYS.flatMap((k) => [k, `*.${k}`, `*.*.${k}`, `*.*.*.${k}`]).concat([
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
]);

const CENSOR = '[redacted]';

/**
 * `code` is both a one-time code (a secret) and the name every error uses for its identifier: an
 * AppError code (`validation_failed`), a Node/system code (`ECONNREFUSED`, `ERR_HTTP_...`), a
 * PostgreSQL SQLSTATE (`23505`, `57P01`: always 5 characters). Those stay readable; anything else
 * under `code` (a 6-digit OTP, whatever a client sent) is redacted. Every other key is always redacted.
 */
export function isErrorCodeValue(value: unknown): boolean {
  if (typeof value === 'string') return /^[A-Za-z][A-Za-z0-9_.:-]{0,63}$/.test(value) || /^[0-9A-Z]{5}$/.test(value);
  return typeof value === 'number' && Number.isInteger(value) && Math.abs(value) < 100_000; // errno, HTTP and library codes
}

function censor(value: unknown, path: string[]): unknown {
  return path.at(-1) === 'code' && isErrorCodeValue(value) ? value : CENSOR;
}

/** `json`: one JSON object a line (production, log collectors); `pretty`: pino-pretty, one readable line an entry (development). */
export type LogFormat = 'json' | 'pretty';

/**
 * pino-pretty as a synchronous stream in this thread (no transport worker): lines keep their order with
 * the process's other output and nothing is lost at exit. Redaction happens before it, in pino.
 */
function prettyStream(destination?: pino.DestinationStream): pino.DestinationStream {
  return pretty({
    sync: true,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    ...(destination ? { destination: destination as NodeJS.WritableStream, colorize: false } : {}),
  });
}

export function createLogger(opts: { level?: string; name?: string; format?: LogFormat; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      name: opts.name,
      level: opts.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor },
      base: { pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.format === 'pretty' ? prettyStream(opts.destination) : opts.destination,
  );
}

export type { Logger };
