/**
 * Every answer the HTTP server itself sends carries the `{ error, message }` envelope, not only the
 * ones Koa renders: Node answers a request it cannot parse (400), headers over its limit (431), a
 * request that took longer than `requestTimeout` (408), an oversize chunk extension (413), an
 * HTTP/1.1 request without Host (400) and an `Expect` it does not know (417) on its own, with an empty
 * body. Here those answers are written with the envelope, with the same status codes.
 */
import http, { type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** Status, code and message for each way Node's HTTP parser or timers refuse a request. */
export function clientErrorAnswer(errCode: string | undefined): { status: number; error: string; message: string } {
  switch (errCode) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, error: 'headers_too_large', message: "The request line and headers exceed the server's limit" };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, error: 'request_timeout', message: 'The request was not received in time' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, error: 'payload_too_large', message: "A chunk extension exceeds the server's limit" };
    default:
      return { status: 400, error: 'bad_request', message: 'The request is not well-formed HTTP' };
  }
}

export function rawEnvelopeResponse(status: number, error: string, message: string, opts: { head?: boolean } = {}): string {
  const body = JSON.stringify({ error, message });
  return (
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    // The answer to a HEAD request has no body (RFC 9110 section 9.3.2), whatever its status.
    (opts.head ? '' : body)
  );
}

function sendEnvelope(res: ServerResponse, status: number, error: string, message: string): void {
  const body = JSON.stringify({ error, message });
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
  res.end(body);
}

/** What an answer given before its request's body was read drains of that body to keep the connection. */
export const UNREAD_BODY_DRAIN_BYTES = 1024 * 1024;
/** How long draining a request's body after its answer may take before the connection is closed. */
const UNREAD_BODY_DRAIN_MS = 5_000;

/**
 * A request answered before its body was read (401 before the body, 413, a body that failed to parse
 * part-way) leaves the rest of that body on the connection. Left there, it blocks the connection: the
 * client, told `keep-alive`, sends its next request behind bytes nobody reads, and a timeout later
 * resets it. So: a small remainder is read and thrown away after the answer, and the connection goes
 * on; a large or unannounced one gets `Connection: close`, and the connection ends after the answer.
 * Either way the drain is bounded in bytes and time.
 */
function settleUnreadBody(req: IncomingMessage, res: ServerResponse): void {
  // The socket's count at the request's start: on a kept-alive connection it also holds earlier requests.
  const readBefore = req.socket.bytesRead;
  const writeHead = res.writeHead;
  res.writeHead = function (this: ServerResponse, ...args: unknown[]) {
    if (!req.complete && !res.headersSent) {
      const declared = Number(req.headers['content-length']);
      const remaining = Number.isFinite(declared) ? declared - (req.socket.bytesRead - readBefore) : Infinity;
      if (req.destroyed || remaining > UNREAD_BODY_DRAIN_BYTES) res.setHeader('Connection', 'close');
    }
    return (writeHead as (...a: unknown[]) => ServerResponse).apply(this, args);
  } as typeof res.writeHead;
  res.once('finish', () => {
    if (req.complete || req.destroyed) return;
    // Whatever was reading the body (a parser that gave up) lets go of it; the rest is thrown away.
    req.unpipe();
    req.removeAllListeners('data');
    let drained = 0;
    req.on('data', (chunk: Buffer) => {
      drained += chunk.length;
      if (drained > UNREAD_BODY_DRAIN_BYTES) req.socket.destroy();
    });
    req.resume();
    const timer = setTimeout(() => req.socket.destroy(), UNREAD_BODY_DRAIN_MS).unref();
    req.once('end', () => clearTimeout(timer));
    req.once('close', () => clearTimeout(timer));
  });
}

/**
 * An HTTP server for a Koa callback whose own refusals carry the envelope. The Host rule of HTTP/1.1
 * (RFC 9112 section 3.2: 400 without it) is kept, answered here instead of by Node.
 */
export function createEnvelopedServer(callback: RequestListener, opts: http.ServerOptions = {}): Server {
  const server = http.createServer({ ...opts, requireHostHeader: false }, (req: IncomingMessage, res: ServerResponse) => {
    settleUnreadBody(req, res);
    if (req.httpVersionMajor === 1 && req.httpVersionMinor >= 1 && req.headers.host === undefined) {
      sendEnvelope(res, 400, 'bad_request', 'An HTTP/1.1 request needs a Host header');
      return;
    }
    callback(req, res);
  });
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    sendEnvelope(res, 417, 'expectation_failed', 'Only `Expect: 100-continue` is supported');
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // What Node does by default, plus a body: answer only when nothing of a response went out yet.
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const { status, error, message } = clientErrorAnswer(err.code);
    const raw = (err as { rawPacket?: Buffer }).rawPacket;
    const head = Buffer.isBuffer(raw) && raw.subarray(0, 5).toString('latin1') === 'HEAD ';
    socket.end(rawEnvelopeResponse(status, error, message, { head }));
    // A client that does not read its answer must not hold the socket.
    setTimeout(() => socket.destroy(), 2000).unref();
  });
  return server;
}
