/**
 * A small, honest stand-in for SGLang's radix cache: it remembers the last N token sequences
 * (prompt + output of finished requests) and reports, for a new prompt, the longest common token
 * prefix with any of them. That is the number SGLang returns as `cached_tokens`.
 *
 * @module
 */

/** Sequences remembered by default. */
export const DEFAULT_PREFIX_CACHE_ENTRIES = 256;

/**
 * Bounded prefix cache over token ids (oldest entry evicted first).
 *
 * @example
 * ```ts
 * const cache = new PrefixCache(4);
 * cache.insert([1, 2, 3, 4]);
 * cache.cachedTokens([1, 2, 9]); // 2
 * ```
 */
export class PrefixCache {
  private readonly entries: number[][] = [];

  constructor(private readonly maxEntries = DEFAULT_PREFIX_CACHE_ENTRIES) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1)
      throw new RangeError("maxEntries must be a positive integer");
  }

  /**
   * Tokens of `prompt` that would be served from cache. Like SGLang, at least one prompt token is
   * always computed, so the result is at most `prompt.length - 1`.
   */
  cachedTokens(prompt: readonly number[]): number {
    let best = 0;
    for (const entry of this.entries) {
      const limit = Math.min(entry.length, prompt.length);
      let n = 0;
      while (n < limit && entry[n] === prompt[n]) n++;
      if (n > best) best = n;
    }
    return Math.max(0, Math.min(best, prompt.length - 1));
  }

  /** Remembers a finished sequence. */
  insert(sequence: readonly number[]): void {
    this.entries.push([...sequence]);
    if (this.entries.length > this.maxEntries) this.entries.shift();
  }

  /** Forgets everything (`/flush_cache`). */
  clear(): void {
    this.entries.length = 0;
  }

  get size(): number {
    return this.entries.length;
  }
}
