/**
 * Upload normalisation and pixel decoding (sharp / libvips).
 *
 * `normaliseUpload` runs once, when a photo enters the system: it accepts only JPEG, PNG and WebP,
 * applies the EXIF orientation, bounds the size and re-encodes a small JPEG without metadata (no GPS,
 * no camera serials), which is what the face jobs carry. `decodeRgb` turns such a JPEG into 8-bit
 * RGB pixels for the models.
 */
import sharp from 'sharp';
import { FaceError } from './face-error.js';

/** Uploads above this many pixels (width x height, as declared by the header) are refused. */
export const MAX_INPUT_PIXELS = 40_000_000;
/** Longest side of the normalised JPEG; smaller images keep their size. */
export const MAX_NORMALISED_SIDE = 1280;
/** JPEG quality of the normalised image. */
export const NORMALISED_JPEG_QUALITY = 90;
/** The formats SPEC 3 accepts (`invalid_image` otherwise). */
export const ACCEPTED_FORMATS: ReadonlySet<string> = new Set(['jpeg', 'png', 'webp']);

/** 8-bit RGB pixels, row-major, 3 interleaved channels. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
}

/**
 * Pixels of an upload (`normaliseUploadRgb`) and, when the upload is a JPEG that the normalisation
 * did not resize, the upload's own bytes: decoding them (`decodeRgb`: the same rotation, flattening
 * and colour space, no resize) gives these very pixels, so a process that needs the JPEG can take them
 * as they are instead of encoding the pixels again.
 */
export interface RgbUpload extends RgbImage {
  jpeg?: Buffer;
}

export interface NormalisedImage {
  jpeg: Buffer;
  /** Upright (after the EXIF orientation). */
  width: number;
  height: number;
  /**
   * The upload's own bytes, its metadata (EXIF) included (`uploadForJob`): for a face job's few
   * seconds in Redis (sealed, deleted as it is read), never stored.
   */
  asItCame?: true;
}

function sharpInput(buf: Buffer, maxPixels = MAX_INPUT_PIXELS) {
  return sharp(buf, {
    limitInputPixels: maxPixels,
    // 'warning' (sharp's default, stated for clarity) aborts on truncated or corrupt pixel data.
    failOn: 'warning',
    // A multi-frame GIF/WebP/TIFF is never read past its first frame.
    pages: 1,
  });
}

/**
 * The format by its magic bytes, before anything is handed to libvips: other formats (SVG, TIFF,
 * HEIF, PDF, ...) never reach a decoder.
 */
export function sniffFormat(buf: Uint8Array): 'jpeg' | 'png' | 'webp' | undefined {
  if (buf.length >= 3 && buf[0] === 0xff && buf[1] === 0xd8 && buf[2] === 0xff) return 'jpeg';
  if (buf.length >= 8 && [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a].every((b, i) => buf[i] === b)) return 'png';
  if (buf.length >= 12 && Buffer.from(buf.subarray(0, 4)).toString('latin1') === 'RIFF' && Buffer.from(buf.subarray(8, 12)).toString('latin1') === 'WEBP')
    return 'webp';
  return undefined;
}

/**
 * A fixed message: the decoder's own text names the library, its version and the inner workings of the
 * file (a fingerprint for whoever probes with crafted uploads), so it stays in `cause` and never reaches
 * an answer.
 */
export const UNDECODABLE_IMAGE_MESSAGE = 'The upload could not be decoded as a JPEG, PNG or WebP image';
export const OVER_PIXEL_LIMIT_MESSAGE = 'The image exceeds the pixel limit';

function asInvalid(err: unknown): FaceError {
  if (err instanceof FaceError) return err;
  // libvips refuses a header over `limitInputPixels` itself: the one library error told apart, by a fixed text.
  const overLimit = err instanceof Error && /pixel limit/i.test(err.message);
  return new FaceError('invalid_image', overLimit ? OVER_PIXEL_LIMIT_MESSAGE : UNDECODABLE_IMAGE_MESSAGE, { cause: err });
}

/**
 * Validate and normalise an upload: EXIF rotation applied, longest side at most 1280 px (`maxSide`
 * when given; never enlarged), alpha flattened on white, sRGB, re-encoded as baseline JPEG q90 without metadata.
 * Throws `FaceError('invalid_image')` for anything that is not a decodable JPEG, PNG or WebP within
 * the pixel limit (`maxPixels`, the deployment's MAX_IMAGE_PIXELS; 40 MP by default).
 */
export async function normaliseUpload(buf: Buffer, opts: { maxPixels?: number; maxSide?: number } = {}): Promise<NormalisedImage> {
  const input = await checkedUpload(buf, opts.maxPixels);
  try {
    const { data, info } = await normalisedPipeline(input, opts).jpeg({ quality: NORMALISED_JPEG_QUALITY }).toBuffer({ resolveWithObject: true });
    return { jpeg: data, width: info.width, height: info.height };
  } catch (err) {
    throw asInvalid(err);
  }
}

/**
 * An upload checked as `normaliseUpload` checks it and normalised the same way (EXIF rotation, at most
 * `maxSide`, alpha flattened, sRGB), but answered as 8-bit RGB pixels: one decode, shrunk as it is
 * decoded, for pixels that are used at once and never stored (a liveness session's light frames),
 * where `normaliseUpload` then `decodeRgb` decodes twice and encodes a JPEG in between.
 */
export async function normaliseUploadRgb(buf: Buffer, opts: { maxPixels?: number; maxSide?: number } = {}): Promise<RgbUpload> {
  const { input, meta } = await checkedUploadMeta(buf, opts.maxPixels);
  // Fit inside a square: a side at most `maxSide` before rotation is at most that after it.
  const unresized = meta.format === 'jpeg' && Math.max(meta.width, meta.height) <= (opts.maxSide ?? MAX_NORMALISED_SIDE);
  try {
    const { data, info } = await normalisedPipeline(input, opts).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    if (info.channels !== 3 || data.length !== info.width * info.height * 3) {
      throw new Error(`unexpected decoded layout: ${info.width}x${info.height}x${info.channels}`);
    }
    return {
      data: new Uint8Array(data.buffer, data.byteOffset, data.length),
      width: info.width,
      height: info.height,
      ...(unresized ? { jpeg: input } : {}),
    };
  } catch (err) {
    throw asInvalid(err);
  }
}

/**
 * Pixels (as `normaliseUploadRgb` answers them) as a baseline JPEG of NORMALISED_JPEG_QUALITY, as
 * `normaliseUpload` would have made it from the same upload: what a face job carries. Encoding pixels
 * already decoded costs less than normalising the upload again, and a JPEG is a twentieth of the
 * pixels' bytes through Redis.
 */
export async function encodeNormalisedJpeg(img: RgbImage): Promise<Buffer> {
  return sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } })
    .jpeg({ quality: NORMALISED_JPEG_QUALITY })
    .toBuffer();
}

/**
 * An upload checked as `normaliseUpload` checks it (its format by its bytes and its header, its pixel
 * count), answered as it came when it is a JPEG that the normalisation to `maxSide` would not resize:
 * `decodeRgb` on it gives the pixels `normaliseUploadRgb` would (the same rotation, flattening and
 * colour space; the test "a small JPEG upload is handed on as it came"), so a process that only hands
 * the JPEG on need not decode it. null for any other upload (normalise it). Its pixels are not
 * decoded here: one that fails to decode past its header fails where it is decoded.
 */
export async function jpegAsItCame(buf: Buffer, opts: { maxPixels?: number; maxSide: number }): Promise<Buffer | null> {
  const { input, meta } = await checkedUploadMeta(buf, opts.maxPixels);
  return meta.format === 'jpeg' && Math.max(meta.width, meta.height) <= opts.maxSide ? input : null;
}

/**
 * An upload as a face job carries it, for a capture that is never stored (a /verify/self selfie, an
 * /identify probe): as it came when it is a JPEG the normalisation would not resize (`jpegAsItCame`:
 * its header checked here, its pixels decoded once, by the face process, with the normalisation's
 * rotation, flattening and colour space), otherwise normalised (`normaliseUpload`). One decode of the
 * frame instead of three (decode, encode here; decode there), and the pixels judged are the upload's
 * own, not a re-encoded copy's.
 */
export async function uploadForJob(buf: Buffer, opts: { maxPixels?: number } = {}): Promise<NormalisedImage> {
  const { input, meta } = await checkedUploadMeta(buf, opts.maxPixels);
  if (meta.format !== 'jpeg' || Math.max(meta.width, meta.height) > MAX_NORMALISED_SIDE) return normaliseUpload(input, opts);
  // EXIF orientations 5 to 8 turn the image a quarter: the upright image is the header's, transposed.
  const transposed = (meta.orientation ?? 1) >= 5;
  return { jpeg: input, width: transposed ? meta.height : meta.width, height: transposed ? meta.width : meta.height, asItCame: true };
}

/** The upload's format (by its bytes and its header) and pixel count checked, before any pixel is decoded. */
async function checkedUpload(buf: Buffer, maxPixelsOpt: number | undefined): Promise<Buffer> {
  return (await checkedUploadMeta(buf, maxPixelsOpt)).input;
}

async function checkedUploadMeta(
  buf: Buffer,
  maxPixelsOpt: number | undefined,
): Promise<{ input: Buffer; meta: { format: string; width: number; height: number; orientation?: number } }> {
  if (!(buf instanceof Uint8Array) || buf.length === 0) {
    throw new FaceError('invalid_image', 'The upload is empty');
  }
  const input = Buffer.isBuffer(buf) ? buf : Buffer.from(buf);
  const sniffed = sniffFormat(input);
  if (!sniffed) throw new FaceError('invalid_image', 'Not a JPEG, PNG or WebP image');
  try {
    const meta = await sharpInput(input, maxPixelsOpt).metadata();
    if (meta.format !== sniffed || !ACCEPTED_FORMATS.has(meta.format)) {
      throw new FaceError('invalid_image', `Unsupported image format: ${meta.format ?? 'unknown'} (JPEG, PNG or WebP only)`);
    }
    if (!meta.width || !meta.height) {
      throw new FaceError('invalid_image', 'The image has no dimensions');
    }
    const maxPixels = maxPixelsOpt ?? MAX_INPUT_PIXELS;
    if (meta.width * meta.height > maxPixels) {
      throw new FaceError('invalid_image', `The image has more than ${maxPixels} pixels`);
    }
    return { input, meta: { format: meta.format, width: meta.width, height: meta.height, ...(meta.orientation ? { orientation: meta.orientation } : {}) } };
  } catch (err) {
    throw asInvalid(err);
  }
}

function normalisedPipeline(input: Buffer, opts: { maxPixels?: number; maxSide?: number }) {
  return (
    sharpInput(input, opts.maxPixels)
      .rotate() // EXIF orientation; the tag is dropped with the rest of the metadata
      // A JPEG reduced by half or more is decoded smaller (libjpeg's shrink-on-load): a small `maxSide` costs less.
      .resize({
        width: opts.maxSide ?? MAX_NORMALISED_SIDE,
        height: opts.maxSide ?? MAX_NORMALISED_SIDE,
        fit: 'inside',
        withoutEnlargement: true,
      })
      .flatten({ background: '#ffffff' })
      .toColourspace('srgb')
  );
}

/**
 * Decode an image (normally the JPEG produced by `normaliseUpload`) into 8-bit RGB pixels. EXIF
 * orientation is applied here too (a no-op for normalised JPEGs, which carry none), so coordinates
 * are always those of the upright image. Throws `FaceError('invalid_image')` on undecodable input.
 */
export async function decodeRgb(jpeg: Buffer): Promise<RgbImage> {
  if (!(jpeg instanceof Uint8Array) || jpeg.length === 0) {
    throw new FaceError('invalid_image', 'The image is empty');
  }
  if (!sniffFormat(jpeg)) throw new FaceError('invalid_image', 'Not a JPEG, PNG or WebP image');
  try {
    const { data, info } = await sharpInput(Buffer.isBuffer(jpeg) ? jpeg : Buffer.from(jpeg))
      .rotate()
      .flatten({ background: '#ffffff' })
      .toColourspace('srgb')
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3 || data.length !== info.width * info.height * 3) {
      throw new Error(`unexpected decoded layout: ${info.width}x${info.height}x${info.channels}`);
    }
    return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
  } catch (err) {
    throw asInvalid(err);
  }
}
