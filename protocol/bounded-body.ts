/**
 * Reading a request body with a size bound, written once for every Node server of the project
 * (the proxy, the simulated engine): the bytes are counted as they arrive and reading stops at
 * the first chunk over the bound, so an oversized body is never held in memory whole. It takes
 * any async iterable of bytes (a Node `IncomingMessage` is one), so it has no Node import.
 *
 * @module
 */

/**
 * The body as UTF-8 text; throws `tooLarge(limit)` as soon as more than `limit` bytes arrived
 * (leaving the loop early destroys a Node stream, so the rest is not read).
 *
 * @example
 * ```ts
 * const text = await readBoundedBody(req, 1 << 20, (n) => new Error(`body exceeds ${n} bytes`));
 * ```
 */
export async function readBoundedBody(
  body: AsyncIterable<Uint8Array | string>,
  limit: number,
  tooLarge: (limit: number) => Error,
): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const encoder = new TextEncoder();
  for await (const chunk of body) {
    const bytes = typeof chunk === "string" ? encoder.encode(chunk) : chunk;
    size += bytes.byteLength;
    if (size > limit) throw tooLarge(limit);
    chunks.push(bytes);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}
