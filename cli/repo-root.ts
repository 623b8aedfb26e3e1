/**
 * The repository's root folder, for the parts of the CLI that run files of the repository.
 *
 * @module
 */
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Repository root (the folder holding `wrangler.toml`).
 *
 * @example
 * ```ts
 * join(REPO_ROOT, "wrangler.toml");
 * ```
 */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
