/**
 * Routed experts (MoE routing replay, "R3"): the experts an engine's MoE router picked for each
 * token it ran, so a trainer can replay the same routes in its forward pass. SGLang, launched with
 * `--enable-return-routed-experts`, returns them for a `/generate` call that sets
 * `return_routed_experts: true` as `meta_info.routed_experts`: base64 of a flat little-endian
 * int32 array shaped `[rows, layers, top_k]`, whose rows are the sequence positions
 * `[routed_experts_start_len, prompt + output − 1)`. The last sampled token was never run through
 * the model, so it has no route until the next turn runs it; a turn that continues a chain asks
 * from its parent's last position, which refreshes that route.
 *
 * A record keeps its call's rows as they came (`start`, `rows`, the shape, `data`); a trace keeps
 * its chain's rows stitched from them, positions `[0, prompt + response − 1)`.
 *
 * Size: `layers × top_k × 4` bytes a token, a third more in base64 (48 layers × top-8, as
 * Qwen3-30B-A3B: 1,536 bytes, 2,048 in base64).
 *
 * @module
 */
import { z } from "zod";

/** A block of routed-expert rows. */
export const RoutedExperts = z
  .strictObject({
    /** The sequence position of the first row. */
    start: z.number().int().min(0),
    rows: z.number().int().min(0),
    layers: z.number().int().min(1),
    top_k: z.number().int().min(1),
    /** Base64 of `rows × layers × top_k` little-endian int32 expert ids (-1: no routed expert). */
    data: z.string(),
  })
  .superRefine((r, ctx) => {
    const want = r.rows * r.layers * r.top_k * 4;
    if (base64Bytes(r.data) !== want)
      ctx.addIssue({
        code: "custom",
        path: ["data"],
        message: `holds ${base64Bytes(r.data)} bytes; ${r.rows} rows × ${r.layers} layers × top-${r.top_k} need ${want}`,
      });
  });
export type RoutedExperts = z.infer<typeof RoutedExperts>;

/**
 * The number of bytes a base64 string decodes to (-1 when it is not base64).
 *
 * @example
 * ```ts
 * base64Bytes("AAAAAA=="); // 4
 * ```
 */
export function base64Bytes(data: string): number {
  if (data.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(data)) return -1;
  const pad = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return (data.length / 4) * 3 - pad;
}

function decode(data: string): Uint8Array {
  const bin = atob(data);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function encode(bytes: Uint8Array): string {
  let bin = "";
  // In slices: String.fromCharCode takes its arguments on the stack.
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/**
 * A chain's routes from its calls' blocks: rows `[0, total)`, each position from the last block
 * that holds it (a later call's rows run the same prefix again and refresh the row of its
 * parent's last sampled token). Null when the blocks do not cover every position, or their
 * shapes differ.
 *
 * @example
 * ```ts
 * stitchRoutedExperts([first, second], prompt.length + response.length - 1);
 * // { start: 0, rows: …, layers, top_k, data }
 * ```
 */
export function stitchRoutedExperts(blocks: readonly RoutedExperts[], total: number): RoutedExperts | null {
  const [head] = blocks;
  if (!head || total < 0) return null;
  const rowBytes = head.layers * head.top_k * 4;
  if (blocks.some((b) => b.layers !== head.layers || b.top_k !== head.top_k)) return null;
  const out = new Uint8Array(total * rowBytes);
  let covered = 0;
  for (const b of blocks) {
    // Blocks arrive in chain order; each starts at or before what is covered so far.
    if (b.start > covered) return null;
    const bytes = decode(b.data);
    const rows = Math.min(b.rows, total - b.start);
    if (rows > 0) out.set(bytes.subarray(0, rows * rowBytes), b.start * rowBytes);
    covered = Math.max(covered, b.start + Math.max(rows, 0));
  }
  if (covered < total) return null;
  return { start: 0, rows: total, layers: head.layers, top_k: head.top_k, data: encode(out) };
}

/**
 * The expert ids of a block as rows of layers of top-k ids (for checks and small tools; a trainer
 * reads `data` into an int32 tensor directly).
 *
 * @example
 * ```ts
 * routedExpertRows(block)[0]; // [[3, 5], [0, 7], …] (layer by layer)
 * ```
 */
export function routedExpertRows(block: RoutedExperts): number[][][] {
  const bytes = decode(block.data);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const rows: number[][][] = [];
  for (let r = 0; r < block.rows; r++) {
    const layers: number[][] = [];
    for (let l = 0; l < block.layers; l++) {
      const ids: number[] = [];
      for (let k = 0; k < block.top_k; k++)
        ids.push(view.getInt32(((r * block.layers + l) * block.top_k + k) * 4, true));
      layers.push(ids);
    }
    rows.push(layers);
  }
  return rows;
}
