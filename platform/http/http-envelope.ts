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

/**
 * An HTTP server for a Koa callback whose own refusals carry the envelope. The Host rule of HTTP/1.1
 * (RFC 9112 section 3.2: 400 without it) is kept, answered here instead of by Node.
 */
export function createEnvelopedServer(callback: RequestListener, opts: http.ServerOptions = {}): Server {
  const server = http.createServer({ ...opts, requireHostHeader: false }, (req: IncomingMessage, res: ServerResponse) => {
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
