/**
 * The load error of a tokenizer folder or chat template, in its own module so that the template
 * checks (`template-support.ts`) can extend it without importing the tokenizer loader.
 *
 * @module
 */

/**
 * The tokenizer files are missing or unreadable, or the chat template cannot be used.
 *
 * @example
 * ```ts
 * await loadChatTokenizer("/no/such/dir").catch((e) => e instanceof TokenizerLoadError); // true
 * ```
 */
export class TokenizerLoadError extends Error {
  override readonly name: string = "TokenizerLoadError";
  /**
   * @param source `template` when the failure is in a chat template given in place of the folder's
   *   (a file that cannot be read, a template that does not parse), else `folder`.
   */
  constructor(
    message: string,
    readonly source: "folder" | "template" = "folder",
  ) {
    super(message);
  }
}
