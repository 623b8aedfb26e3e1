/**
 * Images given to the simulated engine: OpenAI chat `image_url` parts (data URLs; the proxy turns
 * Anthropic and Gemini image blocks into these) and SGLang `/generate`'s `image_data` (data URLs
 * or bare base64). Each image is decoded from its source, its PNG/JPEG header checked, a PNG's
 * stars counted ({@link countBrightBlobs}), and everything is counted in {@link ImageStats}
 * (`/sim/stats` → `images`) so tests can assert the images really arrived.
 *
 * Remote URLs and file paths are refused: the sim never leaves loopback and reads no files for a
 * client. A bad image is a 400 naming the field, as a real multimodal server refuses it.
 *
 * @module
 */
import { createHash } from "node:crypto";
import {
  countBrightBlobs,
  decodePng,
  ImageFormatError,
  type ImageHeader,
  readImageHeader,
  UnsupportedImageError,
} from "./image-decode";

/** Limits on images per request. */
export const IMAGE_LIMITS = {
  /** Images in one request. */
  maxImagesPerRequest: 32,
  /** Decoded bytes of one image. */
  maxImageBytes: 8 * 1024 * 1024,
  /** Recent images kept for `/sim/stats`. */
  recent: 16,
} as const;

/** One image as the sim saw it. */
export interface SimImage extends ImageHeader {
  /** Decoded size in bytes. */
  bytes: number;
  /** First 16 hex digits of the bytes' SHA-256 (keys the policy's draws per image). */
  digest: string;
  /** Stars counted in a PNG's pixels; null when the pixels are not decoded (JPEG, 16-bit or interlaced PNG). */
  stars: number | null;
}

/**
 * A bad image in a request; `field` names it (`messages[0].content[1].image_url.url`, `image_data[0]`).
 *
 * @example
 * ```ts
 * throw new ImageInputError("image_data[0]", "not a PNG or JPEG image");
 * ```
 */
export class ImageInputError extends Error {
  override readonly name = "ImageInputError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+)?(;[\w=.-]+)*;base64,/i;
const BASE64 = /^[A-Za-z0-9+/\r\n]+={0,2}$/;

/**
 * The bytes of an image source: a `data:<mime>;base64,…` URL or bare base64 (SGLang accepts both).
 *
 * @example
 * ```ts
 * imageBytes("data:image/png;base64,iVBORw0KGgo…", "image_data[0]");
 * ```
 */
export function imageBytes(source: unknown, field: string): Buffer {
  if (typeof source !== "string" || source.length === 0)
    throw new ImageInputError(field, "must be a non-empty string (a data URL or base64)");
  let b64: string;
  const m = DATA_URL.exec(source);
  if (m) b64 = source.slice(m[0].length);
  else if (/^(https?|file):/i.test(source) || source.startsWith("/"))
    throw new ImageInputError(
      field,
      "remote URLs and file paths are not fetched by the simulator; send the image inline as a data URL",
    );
  else b64 = source;
  // A base64 string of N characters is about 3N/4 bytes: refuse before decoding a huge one.
  if ((b64.length * 3) / 4 > IMAGE_LIMITS.maxImageBytes + 3)
    throw new ImageInputError(field, `image is larger than ${IMAGE_LIMITS.maxImageBytes} bytes`);
  if (!BASE64.test(b64)) throw new ImageInputError(field, "not valid base64 image data");
  const bytes = Buffer.from(b64, "base64");
  if (bytes.length === 0) throw new ImageInputError(field, "image data is empty");
  return bytes;
}

/**
 * Checks and measures one image (and counts a PNG's stars).
 *
 * @example
 * ```ts
 * inspectImage(readFileSync("stars.png"), "image_data[0]"); // { format: "png", width: 160, height: 120, stars: 4, … }
 * ```
 */
export function inspectImage(bytes: Buffer, field: string): SimImage {
  let header: ImageHeader;
  let stars: number | null = null;
  try {
    header = readImageHeader(bytes);
    if (header.format === "png") {
      try {
        stars = countBrightBlobs(decodePng(bytes));
      } catch (err) {
        // A valid PNG the sim cannot read the pixels of (16-bit, interlaced): measured, not counted.
        if (!(err instanceof UnsupportedImageError)) throw err;
      }
    }
  } catch (err) {
    if (err instanceof ImageFormatError) throw new ImageInputError(field, err.message);
    throw err;
  }
  const digest = createHash("sha256").update(bytes).digest("hex").slice(0, 16);
  return { ...header, bytes: bytes.length, digest, stars };
}

/** Counters of the images the sim received (`/sim/stats` → `images`). */
export class ImageStats {
  private counts = {
    received_total: 0,
    refused_total: 0,
    bytes_total: 0,
    png_total: 0,
    jpeg_total: 0,
    chat_total: 0,
    generate_total: 0,
    stars_total: 0,
  };
  private readonly recent: Array<SimImage & { endpoint: string }> = [];

  /** Counts accepted images of one request. */
  received(endpoint: "chat" | "generate", images: readonly SimImage[]): void {
    for (const image of images) {
      this.counts.received_total++;
      this.counts.bytes_total += image.bytes;
      this.counts[`${image.format}_total`]++;
      this.counts[`${endpoint}_total`]++;
      this.counts.stars_total += image.stars ?? 0;
      this.recent.push({ ...image, endpoint });
      if (this.recent.length > IMAGE_LIMITS.recent) this.recent.shift();
    }
  }

  /** Counts a request refused for a bad image. */
  refused(): void {
    this.counts.refused_total++;
  }

  /**
   * A copy of the counters and the most recent images.
   *
   * @example
   * ```ts
   * engine.images.snapshot().received_total; // 2
   * ```
   */
  snapshot() {
    return { ...this.counts, recent: this.recent.map((r) => ({ ...r })) };
  }
}

/** Checks every image of a request, counting them, or refusing the request (counted too). */
function accept(
  stats: ImageStats,
  endpoint: "chat" | "generate",
  sources: Array<{ source: unknown; field: string }>,
): SimImage[] {
  try {
    if (sources.length > IMAGE_LIMITS.maxImagesPerRequest)
      throw new ImageInputError(
        sources[IMAGE_LIMITS.maxImagesPerRequest]!.field,
        `more than ${IMAGE_LIMITS.maxImagesPerRequest} images in one request`,
      );
    const images = sources.map(({ source, field }) => inspectImage(imageBytes(source, field), field));
    stats.received(endpoint, images);
    return images;
  } catch (err) {
    stats.refused();
    throw err;
  }
}

/**
 * The images of OpenAI chat messages (`{type: "image_url", image_url: {url}}` or `image_url` as a
 * string), in prompt order.
 *
 * @example
 * ```ts
 * const images = imagesFromMessages(body.messages, engine.images);
 * ```
 */
export function imagesFromMessages(
  messages: readonly { content?: unknown }[],
  stats: ImageStats,
): SimImage[] {
  const sources: Array<{ source: unknown; field: string }> = [];
  messages.forEach((m, i) => {
    if (!Array.isArray(m.content)) return;
    m.content.forEach((part: unknown, j) => {
      if (!part || typeof part !== "object") return;
      const p = part as { type?: unknown; image_url?: unknown };
      if (p.type !== "image_url") return;
      const field = `messages[${i}].content[${j}].image_url`;
      if (typeof p.image_url === "string") sources.push({ source: p.image_url, field });
      else
        sources.push({ source: (p.image_url as { url?: unknown } | undefined)?.url, field: `${field}.url` });
    });
  });
  return sources.length ? accept(stats, "chat", sources) : [];
}

/**
 * The images of `/generate`'s `image_data` (one string or a list, in prompt order).
 *
 * @example
 * ```ts
 * const images = imagesFromImageData(body.image_data, engine.images);
 * ```
 */
export function imagesFromImageData(imageData: unknown, stats: ImageStats): SimImage[] {
  if (imageData === undefined || imageData === null) return [];
  const list = Array.isArray(imageData) ? imageData : [imageData];
  if (list.some((x) => Array.isArray(x)))
    throw new ImageInputError(
      "image_data",
      "per-prompt lists are for batch requests, which the simulator refuses",
    );
  const sources = list.map((source, i) => ({
    source,
    field: Array.isArray(imageData) ? `image_data[${i}]` : "image_data",
  }));
  return sources.length ? accept(stats, "generate", sources) : [];
}
