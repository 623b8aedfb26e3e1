/**
 * Just enough image decoding for the simulated engine to check that images really arrived and to
 * "see" them honestly: PNG and JPEG headers (signature, dimensions), full PNG pixel decoding
 * (zlib via `node:zlib`, the five scanline filters, every color type and bit depth, non-interlaced),
 * and a star counter that counts the connected bright blobs of the pixels.
 *
 * The counting rule (documented in `examples/count_stars/README.md`): a pixel is *bright* when its
 * luma `(299 R + 587 G + 114 B) / 1000` (alpha-composited over black) is at least
 * {@link BRIGHT_LUMA}; bright pixels touching by an edge or a corner (8-connectivity) form a blob;
 * blobs of at least {@link MIN_BLOB_PIXELS} pixels count. JPEG pixels are not decoded (no
 * decoder here), nor those of interlaced PNGs: such images are checked and measured,
 * and their count is unknown (`null`).
 *
 * @module
 */
import { inflateSync } from "node:zlib";

/** Luma (0–255) from which a pixel is part of a star. */
export const BRIGHT_LUMA = 128;
/** Smallest blob that counts as a star (smaller ones are noise). */
export const MIN_BLOB_PIXELS = 12;
/** Largest image (width × height) the sim decodes pixels of; bigger ones are measured only. */
export const MAX_DECODE_PIXELS = 4096 * 4096;
/** Largest side the sim accepts at all (SGLang's processors refuse absurd sizes too). */
export const MAX_IMAGE_SIDE = 16_384;

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** What the header of an image says. */
export interface ImageHeader {
  format: "png" | "jpeg";
  width: number;
  height: number;
}

/**
 * The bytes are not a PNG or JPEG the sim can read; the message says what is wrong.
 *
 * @example
 * ```ts
 * try { readImageHeader(bytes); } catch (e) { if (e instanceof ImageFormatError) console.error(e.message); }
 * ```
 */
export class ImageFormatError extends Error {
  override readonly name: string = "ImageFormatError";
}

/**
 * Reads the format and dimensions from a PNG (`IHDR`) or JPEG (`SOFn`) header.
 *
 * @example
 * ```ts
 * readImageHeader(readFileSync("stars.png")); // { format: "png", width: 128, height: 96 }
 * ```
 */
export function readImageHeader(bytes: Uint8Array): ImageHeader {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let header: ImageHeader;
  if (buf.length >= 8 && buf.subarray(0, 8).equals(PNG_SIGNATURE)) header = pngHeader(buf);
  else if (buf.length >= 3 && buf[0] === 0xff && buf[1] === 0xd8 && buf[2] === 0xff) header = jpegHeader(buf);
  else throw new ImageFormatError("not a PNG or JPEG image (unknown signature)");
  if (
    header.width < 1 ||
    header.height < 1 ||
    header.width > MAX_IMAGE_SIDE ||
    header.height > MAX_IMAGE_SIDE
  )
    throw new ImageFormatError(
      `${header.format} dimensions ${header.width}x${header.height} are outside 1..${MAX_IMAGE_SIDE}`,
    );
  return header;
}

function pngHeader(buf: Buffer): ImageHeader {
  // The first chunk must be IHDR (length 13): width and height are big-endian u32 at 16 and 20.
  if (buf.length < 33 || buf.toString("latin1", 12, 16) !== "IHDR" || buf.readUInt32BE(8) !== 13)
    throw new ImageFormatError("PNG without an IHDR chunk first");
  return { format: "png", width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

function jpegHeader(buf: Buffer): ImageHeader {
  let at = 2;
  while (at + 4 <= buf.length) {
    if (buf[at] !== 0xff) throw new ImageFormatError(`JPEG marker expected at byte ${at}`);
    const marker = buf[at + 1]!;
    if (marker === 0xff) {
      at += 1; // fill byte
      continue;
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2; // markers without a length
      continue;
    }
    if (marker === 0xd9 || marker === 0xda) break; // end of image / start of scan: no frame header seen
    const length = buf.readUInt16BE(at + 2);
    // SOF0–SOF15 except DHT (C4), JPG (C8) and DAC (CC): precision, height, width.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      if (at + 9 > buf.length) break;
      return { format: "jpeg", height: buf.readUInt16BE(at + 5), width: buf.readUInt16BE(at + 7) };
    }
    at += 2 + length;
  }
  throw new ImageFormatError("JPEG without a frame header (SOFn) before the scan");
}

/**
 * A valid PNG the sim does not decode pixels of (interlaced, too big):
 * the image is accepted and measured, and its star count is unknown.
 *
 * @example
 * ```ts
 * try { decodePng(bytes); } catch (e) { if (e instanceof UnsupportedImageError) stars = null; }
 * ```
 */
export class UnsupportedImageError extends ImageFormatError {
  override readonly name = "UnsupportedImageError";
}

/** Decoded 8-bit RGBA pixels. */
export interface Pixels {
  width: number;
  height: number;
  /** `width * height * 4` bytes, row-major RGBA. */
  rgba: Uint8Array;
}

/**
 * Decodes a non-interlaced PNG (gray, RGB, palette, gray+alpha, RGBA; 1–16 bits) to 8-bit RGBA
 * (16-bit samples keep their high byte). Throws {@link UnsupportedImageError} for interlaced or
 * oversized images and {@link ImageFormatError} for broken data.
 *
 * @example
 * ```ts
 * const { width, height, rgba } = decodePng(readFileSync("stars.png"));
 * ```
 */
export function decodePng(bytes: Uint8Array): Pixels {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const { width, height } = readImageHeader(buf);
  if (width * height > MAX_DECODE_PIXELS)
    throw new UnsupportedImageError(
      `PNG of ${width}x${height} exceeds ${MAX_DECODE_PIXELS} pixels to decode`,
    );
  const depth = buf[24]!;
  const colorType = buf[25]!;
  const interlace = buf[28]!;
  const channels = ({ 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 } as Record<number, number>)[colorType];
  if (channels === undefined) throw new ImageFormatError(`PNG color type ${colorType} is invalid`);
  // PNG allows sub-byte depths for gray and palette only, 16 bits for all but palette.
  const allowed = colorType === 0 ? [1, 2, 4, 8, 16] : colorType === 3 ? [1, 2, 4, 8] : [8, 16];
  if (!allowed.includes(depth))
    throw new ImageFormatError(`PNG bit depth ${depth} is invalid for color type ${colorType}`);
  if (interlace !== 0) throw new UnsupportedImageError("interlaced PNGs are not decoded");
  const idat: Buffer[] = [];
  let palette: Buffer | null = null;
  let at = 8;
  while (at + 8 <= buf.length) {
    const length = buf.readUInt32BE(at);
    const type = buf.toString("latin1", at + 4, at + 8);
    const data = buf.subarray(at + 8, at + 8 + length);
    if (data.length !== length) throw new ImageFormatError(`PNG chunk ${type} is truncated`);
    if (type === "IDAT") idat.push(data);
    else if (type === "PLTE") palette = data;
    else if (type === "IEND") break;
    at += 12 + length;
  }
  if (idat.length === 0) throw new ImageFormatError("PNG without image data (IDAT)");
  if (colorType === 3 && !palette) throw new ImageFormatError("palette PNG without a PLTE chunk");
  let raw: Buffer;
  try {
    raw = inflateSync(Buffer.concat(idat));
  } catch (err) {
    throw new ImageFormatError(`PNG image data does not inflate: ${(err as Error).message}`);
  }
  const bitsPerPixel = channels * depth;
  const stride = Math.ceil((width * bitsPerPixel) / 8);
  if (raw.length < height * (stride + 1))
    throw new ImageFormatError(`PNG image data is ${raw.length} bytes, expected ${height * (stride + 1)}`);
  // Filters work on bytes, with the byte distance of one pixel (at least 1).
  const rows = unfilter(raw, stride, height, Math.max(1, bitsPerPixel / 8));
  const maxSample = 2 ** depth - 1;
  /** Sample `c` of pixel (x, y), scaled to 0–255 (palette indices are not scaled). */
  const sample = (y: number, x: number, c: number): number => {
    const row = y * stride;
    if (depth === 8) return rows[row + x * channels + c]!;
    if (depth === 16) return rows[row + (x * channels + c) * 2]!; // the high byte
    const bit = x * depth; // sub-byte depths have one channel
    const v = (rows[row + (bit >> 3)]! >> (8 - depth - (bit & 7))) & maxSample;
    return colorType === 3 ? v : Math.round((v * 255) / maxSample);
  };
  const rgba = new Uint8Array(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let r: number;
      let g: number;
      let b: number;
      let a = 255;
      if (colorType === 0 || colorType === 4) {
        r = g = b = sample(y, x, 0);
        if (colorType === 4) a = sample(y, x, 1);
      } else if (colorType === 3) {
        const idx = sample(y, x, 0) * 3;
        r = palette![idx] ?? 0;
        g = palette![idx + 1] ?? 0;
        b = palette![idx + 2] ?? 0;
      } else {
        r = sample(y, x, 0);
        g = sample(y, x, 1);
        b = sample(y, x, 2);
        if (colorType === 6) a = sample(y, x, 3);
      }
      rgba.set([r, g, b, a], (y * width + x) * 4);
    }
  }
  return { width, height, rgba };
}

/** Reverses PNG's per-row filters (None, Sub, Up, Average, Paeth). */
function unfilter(raw: Buffer, stride: number, height: number, bpp: number): Uint8Array {
  const out = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const src = y * (stride + 1) + 1;
    const row = y * stride;
    const prev = row - stride;
    for (let x = 0; x < stride; x++) {
      const left = x >= bpp ? out[row + x - bpp]! : 0;
      const up = y > 0 ? out[prev + x]! : 0;
      const upLeft = y > 0 && x >= bpp ? out[prev + x - bpp]! : 0;
      let predictor: number;
      switch (filter) {
        case 0:
          predictor = 0;
          break;
        case 1:
          predictor = left;
          break;
        case 2:
          predictor = up;
          break;
        case 3:
          predictor = (left + up) >> 1;
          break;
        case 4: {
          const p = left + up - upLeft;
          const pa = Math.abs(p - left);
          const pb = Math.abs(p - up);
          const pc = Math.abs(p - upLeft);
          predictor = pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
          break;
        }
        default:
          throw new ImageFormatError(`PNG row ${y} has unknown filter type ${filter}`);
      }
      out[row + x] = (raw[src + x]! + predictor) & 0xff;
    }
  }
  return out;
}

/**
 * Counts the stars of an image: connected (8-neighbour) blobs of bright pixels of at least
 * {@link MIN_BLOB_PIXELS} pixels, a pixel being bright when its luma over black is ≥ {@link BRIGHT_LUMA}.
 *
 * @example
 * ```ts
 * countBrightBlobs(decodePng(readFileSync("stars-5.png"))); // 5
 * ```
 */
export function countBrightBlobs(px: Pixels): number {
  const { width, height, rgba } = px;
  const n = width * height;
  const bright = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    const o = i * 4;
    const luma = (299 * rgba[o]! + 587 * rgba[o + 1]! + 114 * rgba[o + 2]!) / 1000;
    bright[i] = (luma * rgba[o + 3]!) / 255 >= BRIGHT_LUMA ? 1 : 0;
  }
  // Iterative flood fill with an explicit stack: a recursive one would overflow on big blobs.
  const stack = new Int32Array(n);
  let blobs = 0;
  for (let start = 0; start < n; start++) {
    if (bright[start] !== 1) continue;
    bright[start] = 2;
    let top = 0;
    stack[top++] = start;
    let size = 0;
    while (top > 0) {
      const i = stack[--top]!;
      size++;
      const x = i % width;
      const y = (i - x) / width;
      for (let dy = -1; dy <= 1; dy++) {
        const ny = y + dy;
        if (ny < 0 || ny >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          if ((dx === 0 && dy === 0) || nx < 0 || nx >= width) continue;
          const j = ny * width + nx;
          if (bright[j] === 1) {
            bright[j] = 2;
            stack[top++] = j;
          }
        }
      }
    }
    if (size >= MIN_BLOB_PIXELS) blobs++;
  }
  return blobs;
}
