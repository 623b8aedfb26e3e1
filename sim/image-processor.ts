/**
 * The simulated engine's multimodal processor: a fixed, stated image-pad expansion mirroring
 * SGLang's Qwen-VL processor (SGLang 0.5.13 / main as of 2026-11,
 * `python/sglang/srt/multimodal/processors/qwen_vl.py` + `base_processor.py`) with Qwen2/2.5-VL's
 * vision geometry: 14 px patches merged 2×2, so each image of W×H pixels is first resized by
 * `smart_resize` (both sides rounded to multiples of 28, total pixels kept in
 * [4·28·28, 16384·28·28], aspect ratio at most 200) and then takes `(H'/28)·(W'/28)` pads.
 *
 * With `image_data`, SGLang splits the decoded prompt on the placeholder
 * `<|vision_start|><|image_pad|><|vision_end|>` (`load_mm_data`), pairs the placeholders with the
 * images in order and lets the processor expand each `<|image_pad|>` to the image's token count;
 * the expanded ids are what the model runs and what `prompt_token_ids` returns. A placeholder
 * count that differs from the image count fails in SGLang (`legacy_load_mm_data` runs out of
 * images, or the processor/model finds features and tokens that do not match): the sim refuses it.
 *
 * @module
 */

/**
 * Qwen2/2.5-VL's image geometry as SGLang's Qwen-VL processor applies it.
 *
 * @example
 * ```ts
 * QWEN_VL_GEOMETRY.patchSize * QWEN_VL_GEOMETRY.mergeSize; // 28, the resize factor
 * ```
 */
export const QWEN_VL_GEOMETRY = {
  /** ViT patch side (px). */
  patchSize: 14,
  /** Patches merged per side into one LLM token. */
  mergeSize: 2,
  /** `IMAGE_FACTOR`: sides are rounded to multiples of patchSize · mergeSize. */
  factor: 28,
  /** `MIN_PIXELS` = 4 · 28 · 28. */
  minPixels: 4 * 28 * 28,
  /** `MAX_PIXELS` = 16384 · 28 · 28 (SGLang's default `SGLANG_IMAGE_MAX_PIXELS`). */
  maxPixels: 16384 * 28 * 28,
  /** `MAX_RATIO`: longer side / shorter side. */
  maxRatio: 200,
} as const;

/** The token ids of a Qwen-VL image placeholder. */
export interface ImageTokenIds {
  visionStart: number;
  imagePad: number;
  visionEnd: number;
}

/**
 * An image the processor cannot pair or size; `field` names the request field.
 *
 * @example
 * ```ts
 * throw new ImageProcessorError("image_data", "2 images for 1 image placeholder");
 * ```
 */
export class ImageProcessorError extends Error {
  override readonly name = "ImageProcessorError";
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/** Python's `round()` (half to even), which `smart_resize`'s `round_by_factor` uses. */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * SGLang's `smart_resize` for Qwen-VL: the resized `[height, width]`.
 *
 * @example
 * ```ts
 * smartResize(120, 160); // [112, 168]
 * ```
 */
export function smartResize(height: number, width: number): [number, number] {
  const { factor, minPixels, maxPixels, maxRatio } = QWEN_VL_GEOMETRY;
  if (Math.max(height, width) / Math.min(height, width) > maxRatio)
    throw new ImageProcessorError(
      "image_data",
      `absolute aspect ratio must be smaller than ${maxRatio}, got ${Math.max(height, width) / Math.min(height, width)}`,
    );
  let h = Math.max(factor, roundHalfEven(height / factor) * factor);
  let w = Math.max(factor, roundHalfEven(width / factor) * factor);
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.floor(height / beta / factor) * factor;
    w = Math.floor(width / beta / factor) * factor;
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return [h, w];
}

/**
 * Pads one image takes in the prompt: `grid_t · grid_h · grid_w / mergeSize²` with `grid_t = 1`.
 *
 * @example
 * ```ts
 * imagePadCount(160, 120); // 24 (resized to 168×112: 12×8 patches, merged 2×2)
 * ```
 */
export function imagePadCount(width: number, height: number): number {
  const [h, w] = smartResize(height, width);
  const { patchSize, mergeSize } = QWEN_VL_GEOMETRY;
  return ((h / patchSize) * (w / patchSize)) / (mergeSize * mergeSize);
}

/**
 * Expands each placeholder's `<|image_pad|>` to its image's pad count, pairing placeholders and
 * images in order. Refuses (naming `field`) a placeholder count that differs from the image
 * count and a pad outside a one-pad placeholder (SGLang's processor expands every pad again, so
 * an already expanded prompt would claim more images than were sent). A prompt with no pad at all
 * is returned unchanged when `allowNoPlaceholder` (a text-only template, which renders none).
 *
 * @example
 * ```ts
 * expandImagePads([1, VS, PAD, VE, 2], [{ width: 160, height: 120 }], ids, "image_data"); // [1, VS, PAD×24, VE, 2]
 * ```
 */
export function expandImagePads(
  promptIds: readonly number[],
  images: ReadonlyArray<{ width: number; height: number }>,
  ids: ImageTokenIds,
  field: string,
  options: { allowNoPlaceholder?: boolean } = {},
): number[] {
  const pads = promptIds.reduce((n, id) => n + (id === ids.imagePad ? 1 : 0), 0);
  if (pads === 0 && options.allowNoPlaceholder) return [...promptIds];
  const out: number[] = [];
  let placeholders = 0;
  for (let i = 0; i < promptIds.length; i++) {
    const id = promptIds[i]!;
    if (id !== ids.imagePad) {
      out.push(id);
      continue;
    }
    if (promptIds[i - 1] !== ids.visionStart || promptIds[i + 1] !== ids.visionEnd)
      throw new ImageProcessorError(
        field,
        `input_ids[${i}]: <|image_pad|> outside a <|vision_start|><|image_pad|><|vision_end|> placeholder (send one pad per image; the processor expands it)`,
      );
    const image = images[placeholders++];
    if (image) out.push(...Array<number>(imagePadCount(image.width, image.height)).fill(ids.imagePad));
  }
  if (placeholders !== images.length)
    throw new ImageProcessorError(
      field,
      `${images.length} image(s) for ${placeholders} image placeholder(s) in the prompt; each image needs one <|vision_start|><|image_pad|><|vision_end|>`,
    );
  return out;
}
