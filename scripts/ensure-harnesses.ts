/**
 * The pinned harness CLIs, installed on demand: runs `scripts/install-harnesses.sh` for the
 * harnesses asked for (a no-op without network when each is already there at its pinned version,
 * so calling it before every run costs a few stat calls) and says whether they are usable.
 * `test/e2e/harnesses.test.ts` and `scripts/run-harnesses.ts` call it, so a fresh clone runs the
 * real CLIs without a separate install step; when the registry cannot be reached the caller gets
 * the reason and the command to run once it can.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { REPO_ROOT } from "../cli/wrangler-dev";
import { PRESET_PACKAGES } from "../gateway-agent/harness";

type Presets = typeof PRESET_PACKAGES;
/** A harness that `scripts/install-harnesses.sh` can install (a preset installed with npm). */
export type InstallableHarness = {
  [K in keyof Presets]: Presets[K]["via"] extends "npm" ? K : never;
}[keyof Presets];

/** Where `scripts/install-harnesses.sh` puts the CLIs by default. */
export const DEFAULT_HARNESS_DIR = join(REPO_ROOT, ".polar", "harnesses");

/** The install script, relative to the repository root. */
export const INSTALL_SCRIPT = "scripts/install-harnesses.sh";

/** What {@link ensureHarnesses} found and did. */
export interface EnsureHarnessesResult {
  /** True when every harness asked for has its binary in `<dir>/bin`. */
  ok: boolean;
  /** Harnesses the script installed in this call (missing, or at another version, before it). */
  installed: string[];
  /** Wall time of the install step, seconds. */
  seconds: number;
  /** Why not `ok`, with the command that fixes it. */
  reason?: string;
}

/** Options of {@link ensureHarnesses}. */
export interface EnsureHarnessesOptions {
  /** Harness folder (default `.polar/harnesses`). */
  dir?: string;
  /** Extra environment of the install (npm settings such as `npm_config_registry`). */
  env?: Record<string, string>;
  log?: (line: string) => void;
}

/**
 * The binaries a harness folder is missing for `harnesses` (empty when all are installed).
 *
 * @example
 * ```ts
 * missingHarnesses(DEFAULT_HARNESS_DIR, ["pi"]); // [] once install-harnesses.sh ran
 * ```
 */
export function missingHarnesses<H extends InstallableHarness>(dir: string, harnesses: readonly H[]): H[] {
  return harnesses.filter((h) => !existsSync(join(dir, "bin", PRESET_PACKAGES[h].bin)));
}

/** The last npm error lines of an install's output (what a user needs to see of it). */
function installError(output: string): string {
  const lines = output.split("\n").map((l) => l.trim());
  const npm = lines.filter((l) => /^npm (error|ERR!) (code|errno|network|request|\w+ \S+ failed)/.test(l));
  const picked = npm.length > 0 ? npm.slice(0, 3) : lines.filter(Boolean).slice(-2);
  return picked.join(" | ");
}

/**
 * Installs the pinned CLIs of `harnesses` that `dir` lacks (or has at another version) with
 * `scripts/install-harnesses.sh`, once; later calls reuse them without network.
 *
 * @example
 * ```ts
 * const r = await ensureHarnesses(["pi", "codex"], { log: console.log });
 * if (!r.ok) throw new Error(r.reason);
 * ```
 */
export async function ensureHarnesses(
  harnesses: readonly InstallableHarness[],
  opts: EnsureHarnessesOptions = {},
): Promise<EnsureHarnessesResult> {
  const dir = opts.dir ?? DEFAULT_HARNESS_DIR;
  const missing = missingHarnesses(dir, harnesses);
  const started = Date.now();
  if (missing.length > 0)
    opts.log?.(`harness CLIs not in ${dir}: ${missing.join(", ")}; installing the pinned versions (once)`);
  const run = await execa("bash", [join(REPO_ROOT, INSTALL_SCRIPT), ...harnesses], {
    cwd: REPO_ROOT,
    env: { ...opts.env, POLAR_HARNESS_DIR: dir },
    all: true,
    reject: false,
  });
  const seconds = (Date.now() - started) / 1000;
  const fix = `run ${INSTALL_SCRIPT} ${harnesses.join(" ")} where the npm registry is reachable`;
  if (run.exitCode !== 0)
    return {
      ok: false,
      installed: [],
      seconds,
      reason: `${INSTALL_SCRIPT} ${harnesses.join(" ")} failed (exit ${run.exitCode}): ${installError(run.all ?? "")}; ${fix}`,
    };
  const still = missingHarnesses(dir, harnesses);
  if (still.length > 0)
    return {
      ok: false,
      installed: [],
      seconds,
      reason: `no binary in ${dir}/bin for ${still.join(", ")}; ${fix}`,
    };
  // The script says `== <name>: installing <pkg>@<version>` for each one it had to install.
  const installed = [...(run.all ?? "").matchAll(/^== (\w+): installing /gm)].map((m) => m[1]!);
  if (installed.length > 0) opts.log?.(`installed ${installed.join(", ")} in ${seconds.toFixed(0)} s`);
  return { ok: true, installed, seconds };
}
