/**
 * The environment a session's commands see. It is built from an allow-list, never from the
 * gateway's whole `process.env`: the gateway holds secrets (its control-plane token, cloud
 * credentials) that an agent under training must not be able to read.
 *
 * @module
 */

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

/**
 * The allow-listed part of `source` (default: the gateway's own environment).
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
  return env;
}
