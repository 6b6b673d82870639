/**
 * Request bodies: JSON for JSON routes, multipart (koa-body + formidable) for upload routes. Uploads
 * are kept in memory, never written to disk (they are biometrics), and capped at MAX_UPLOAD_BYTES (413).
 */
import { Writable } from 'node:stream';
import type { Context, Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { File } from 'formidable';
import { AppError } from '../../errors.js';
import type { UploadedFile } from '../route-table.js';

const buffers = new WeakMap<object, Buffer[]>();

const MAX_FIELDS = 20;
const MAX_FILES = 4;
// formidable's error codes (formidable/src/FormidableError.js).
const MAX_FIELDS_EXCEEDED = 1007;
const MAX_FILES_EXCEEDED = 1015;

function tooLarge(limit: number) {
  return new AppError('payload_too_large', `The upload exceeds the limit of ${limit} bytes`, { details: { limitBytes: limit } });
}

export function jsonBody(limitBytes = 64 * 1024): Middleware {
  const parse = koaBody({
    json: true,
    multipart: false,
    urlencoded: false,
    text: false,
    jsonLimit: limitBytes,
    jsonStrict: true,
    // DELETE /users/{id} carries `{ proofToken }`: parse bodies of every method whose route declares one.
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
  });
  return async (ctx, next) => {
    const hasBody = Number(ctx.get('content-length') || 0) > 0 || ctx.get('transfer-encoding') !== '';
    if (hasBody && !ctx.is('application/json', 'application/*+json')) {
      throw new AppError('unsupported_media_type', 'Send the body as application/json');
    }
    try {
      await parse(ctx, async () => {});
    } catch (e) {
      const err = e as { status?: number; statusCode?: number; type?: string; message?: string };
      if (err.status === 413 || err.statusCode === 413 || err.type === 'entity.too.large') {
        throw new AppError('payload_too_large', `The JSON body exceeds ${limitBytes} bytes`);
      }
      throw new AppError('validation_failed', 'The JSON body could not be parsed', { details: { reason: 'malformed JSON' } });
    }
    await next();
  };
}

/**
 * `maxFiles`: the file parts the route's fields can hold (at least MAX_FILES): a liveness frames call
 * carries up to LIVENESS_MAX_FRAMES pose frames and 8 light frames.
 */
export function multipartBody(maxUploadBytes: number, maxFiles = MAX_FILES): Middleware {
  const fileLimit = Math.max(MAX_FILES, maxFiles);
  const parse = koaBody({
    json: false,
    urlencoded: false,
    text: false,
    multipart: true,
    formidable: {
      maxFileSize: maxUploadBytes,
      maxTotalFileSize: maxUploadBytes,
      maxFiles: fileLimit,
      maxFields: MAX_FIELDS,
      maxFieldsSize: 64 * 1024,
      allowEmptyFiles: true,
      minFileSize: 0,
      fileWriteStreamHandler: ((file: unknown) => {
        const chunks: Buffer[] = [];
        buffers.set(file as object, chunks);
        return new Writable({
          write(chunk: Buffer, _enc, cb) {
            chunks.push(chunk);
            cb();
          },
        });
      }) as never,
    },
  });
  return async (ctx, next) => {
    if (!ctx.is('multipart/form-data')) {
      throw new AppError('unsupported_media_type', 'Send the request as multipart/form-data');
    }
    // Refuse an announced oversize body before reading it (the multipart envelope adds a little).
    const announced = Number(ctx.get('content-length') || 0);
    if (announced > maxUploadBytes + 64 * 1024) throw tooLarge(maxUploadBytes);
    try {
      await parse(ctx, async () => {});
    } catch (e) {
      const err = e as { httpCode?: number; code?: number; message?: string };
      // Too many parts is a malformed request, not a large one (formidable says 413 for both).
      if (err.code === MAX_FIELDS_EXCEEDED || err.code === MAX_FILES_EXCEEDED) {
        throw new AppError('validation_failed', 'The multipart body has too many parts', {
          details: { reason: err.code === MAX_FIELDS_EXCEEDED ? `more than ${MAX_FIELDS} text fields` : `more than ${fileLimit} files` },
        });
      }
      if (err.code === 1009 || err.code === 1016 || err.httpCode === 413) throw tooLarge(maxUploadBytes);
      throw new AppError('validation_failed', 'The multipart body could not be parsed', { details: { reason: err.message ?? 'malformed' } });
    }
    await next();
  };
}

/** Collects the in-memory uploads of a parsed multipart request. */
export function uploadedFiles(ctx: Context): Record<string, UploadedFile[]> {
  const out: Record<string, UploadedFile[]> = {};
  const files = ctx.request.files ?? {};
  for (const [field, value] of Object.entries(files)) {
    const list = (Array.isArray(value) ? value : [value]) as File[];
    out[field] = list.map((f) => ({
      field,
      filename: f.originalFilename ?? null,
      mimetype: f.mimetype ?? null,
      size: f.size,
      data: Buffer.concat(buffers.get(f) ?? []),
    }));
  }
  return out;
}
