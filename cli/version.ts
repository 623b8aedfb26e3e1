/**
 * The version `polar --version` prints: the `version` of the package.json one folder above the
 * running CLI code. From a clone that is the repository's package.json (`cli/..`); from the
 * installed gateway package it is the package's own (`dist/..`), so the number printed is the one
 * npm installed.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The folder holding the package.json of the running CLI: the repository root from a clone, the
 * package root from an install (the compiled code lives in `dist/`, one level down).
 *
 * @example
 * ```ts
 * readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8");
 * ```
 */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Reads `version` from `<root>/package.json`; throws naming the file when it has none.
 *
 * @example
 * ```ts
 * polarVersion(); // "0.1.0"
 * ```
 */
export function polarVersion(root: string = PACKAGE_ROOT): string {
  const file = join(root, "package.json");
  const pkg = JSON.parse(readFileSync(file, "utf8")) as { version?: unknown };
  if (typeof pkg.version !== "string" || pkg.version === "") throw new Error(`${file}: no "version"`);
  return pkg.version;
}
