/**
 * The environment a session's commands see. It is built from an allow-list, never from the
 * gateway's whole `process.env`: the gateway holds secrets (its control-plane token, cloud
 * credentials) that an agent under training must not be able to read.
 *
 * Pre-installed harness CLIs: when the gateway runs with `POLAR_HARNESS_DIR` (the folder
 * `scripts/install-harnesses.sh` fills), its `bin/` goes first on the sessions' PATH, so a preset's
 * install step (`command -v <cli> || npm install -g …`) finds the pinned CLI and never reaches for
 * the network.
 *
 * @module
 */
import path from "node:path";

/** Variables copied from the gateway's environment when set: what a shell needs to work. */
export const INHERITED_ENV = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "LC_ALL",
  "LC_CTYPE",
  "TZ",
  "TMPDIR",
  "TERM",
] as const;

/** Gateway variable naming the folder of pre-installed harness CLIs (its `bin/` joins PATH). */
export const HARNESS_DIR_ENV = "POLAR_HARNESS_DIR";

/**
 * The absolute harness folder named by `POLAR_HARNESS_DIR` in `source`, or undefined when unset.
 *
 * @example
 * ```ts
 * harnessDir({ POLAR_HARNESS_DIR: ".polar/harnesses" }); // "/srv/polar/.polar/harnesses"
 * ```
 */
export function harnessDir(source: NodeJS.ProcessEnv = process.env): string | undefined {
  const dir = source[HARNESS_DIR_ENV];
  return dir ? path.resolve(dir) : undefined;
}

/**
 * The allow-listed part of `source` (default: the gateway's own environment), with the harness
 * folder's `bin/` first on PATH when `POLAR_HARNESS_DIR` is set.
 *
 * @example
 * ```ts
 * const env = { ...baseEnv(), ...task.runtime.env };
 * ```
 */
export function baseEnv(source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of INHERITED_ENV) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  const dir = harnessDir(source);
  if (dir) env.PATH = [path.join(dir, "bin"), env.PATH].filter(Boolean).join(":");
  return env;
}
