/**
 * The start-up error of token mode that names the option to fix, in its own module so that the
 * modules `mode.ts` is assembled from can throw it without importing `mode.ts`.
 *
 * @module
 */

/**
 * A token-mode option is unusable (unknown parser, bad context length); the message names it.
 *
 * @example
 * ```ts
 * try { await TokenMode.create({ toolCallParser: "nope" }); } catch (e) { (e as TokenModeConfigError).option; } // "toolCallParser"
 * ```
 */
export class TokenModeConfigError extends Error {
  override readonly name = "TokenModeConfigError";
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`${option}: ${message}`);
  }
}
