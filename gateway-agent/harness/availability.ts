/**
 * Which harness presets this gateway host can run in its `local` runtime, checked at start (logged,
 * on `/health` and `/metrics`) and again for each session before its INIT spends any budget.
 *
 * A preset is available when its CLI is on the sessions' PATH (the gateway's allow-listed PATH,
 * with `POLAR_HARNESS_DIR/bin` first) and visible inside the sandbox, or when its install step
 * (`command -v <cli> || npm install -g …`) can run. Under bubblewrap it cannot: the host
 * filesystem is read-only there (and offline sessions have no network), so such a session would
 * only fail after the npm install timed out. Without bubblewrap the install step needs the
 * installer on PATH and, for npm, a writable global prefix.
 *
 * Container runtimes (`docker`, `apptainer`) and custom runtimes are not checked: the image
 * decides what is installed, and the install step runs inside it.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { accessSync, constants, realpathSync, statSync } from "node:fs";
import path from "node:path";
import type { AgentSpec, RuntimeSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import { gatewayHome, hiddenInSandbox } from "../runtime/bwrap";
import { baseEnv, HARNESS_DIR_ENV, harnessDir } from "./env";
import { PRESET_PACKAGES, type PresetName } from "./presets";

/** What the gateway found for one preset. */
export interface HarnessCheck {
  /** True when local sessions of this preset can run here. */
  available: boolean;
  /** `installed`: the CLI is on the sessions' PATH; `install_step`: the preset installs it per session. */
  via: "installed" | "install_step" | null;
  /** Where the sessions' PATH finds the CLI (null when it does not). */
  cli: string | null;
  /** Why it is not available (null when it is). */
  reason: string | null;
  /** What to do about it (null when available). */
  fix: string | null;
}

/** How the local runtime runs sessions on this host (what decides visibility and installs). */
export interface HarnessHostOptions {
  /** True when local sessions run inside bubblewrap. */
  sandboxed: boolean;
  /** The gateway's work root (hidden inside the sandbox). */
  workRoot: string;
  /** Environment the sessions' PATH comes from (default: the gateway's). */
  env?: NodeJS.ProcessEnv;
}

const executable = (file: string): boolean => {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
};

/** First `bin` on `pathVar` that is an executable file, or null. */
function which(bin: string, pathVar: string): string | null {
  for (const dir of pathVar.split(":")) {
    if (!dir) continue;
    const file = path.join(dir, bin);
    if (executable(file)) return file;
  }
  return null;
}

const writable = (dir: string): boolean => {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
};

/** The gateway's harness folder as the fix should name it. */
const harnessFolderHint = (env: NodeJS.ProcessEnv) => harnessDir(env) ?? ".polar/harnesses";

/**
 * The harness availability of one gateway host. CLI lookups are live (cheap `stat`s, so a CLI
 * installed after start is seen by the next session); whether an install step could run is probed
 * once.
 *
 * @example
 * ```ts
 * const harnesses = new HarnessAvailability({ sandboxed: true, workRoot });
 * harnesses.check("codex"); // { available: false, reason: "…", fix: "polar harnesses install codex …" }
 * harnesses.require(session.agent, spec, "gpu-0"); // throws a configuration SessionFailure when unavailable
 * ```
 */
export class HarnessAvailability {
  private readonly env: NodeJS.ProcessEnv;
  private readonly installProbe = new Map<"npm" | "pip", string | null>();

  constructor(private readonly host: HarnessHostOptions) {
    this.env = host.env ?? process.env;
  }

  /** The check of every preset, by name. */
  report(): Record<PresetName, HarnessCheck> {
    const out = {} as Record<PresetName, HarnessCheck>;
    for (const name of Object.keys(PRESET_PACKAGES) as PresetName[]) out[name] = this.check(name);
    return out;
  }

  /**
   * One preset's availability. With `install: false` (the task's `agent.settings.install`) only an
   * installed CLI counts.
   */
  check(name: PresetName, opts: { install?: boolean } = {}): HarnessCheck {
    const pkg = PRESET_PACKAGES[name];
    const pathVar = baseEnv(this.env).PATH ?? "";
    const found = which(pkg.bin, pathVar);
    let hiddenAt: string | null = null;
    if (found && this.host.sandboxed) {
      const where = {
        workRoot: this.host.workRoot,
        hostHome: this.env.HOME ?? gatewayHome(),
        harnessDir: harnessDir(this.env),
      };
      const real = realOrSelf(found);
      if (hiddenInSandbox(found, where) || hiddenInSandbox(real, where)) hiddenAt = real;
    }
    if (found && !hiddenAt) return { available: true, via: "installed", cli: found, reason: null, fix: null };
    const missing = hiddenAt
      ? `the '${pkg.bin}' CLI (${hiddenAt}) is in a folder the sandbox hides (the gateway user's home, /tmp or the work root)`
      : `the '${pkg.bin}' CLI is not on the sessions' PATH (${
          harnessDir(this.env)
            ? `${HARNESS_DIR_ENV}=${harnessDir(this.env)} has no bin/${pkg.bin}`
            : `${HARNESS_DIR_ENV} is not set`
        })`;
    const install = opts.install ?? true;
    const blocked = install ? this.installBlocked(pkg.via) : "agent.settings.install is false";
    if (!blocked) return { available: true, via: "install_step", cli: null, reason: null, fix: null };
    return {
      available: false,
      via: null,
      cli: null,
      reason: `${missing}, and its install step cannot run: ${blocked}`,
      fix:
        pkg.via === "npm"
          ? `on the gateway host run polar harnesses install ${name} --dir ${harnessFolderHint(this.env)}, then restart the gateway with ${HARNESS_DIR_ENV}=${harnessFolderHint(this.env)}`
          : `install ${pkg.pkg}==${pkg.version} on the gateway host so '${pkg.bin}' is on the gateway's PATH, then restart the gateway`,
    };
  }

  /**
   * Throws a `configuration` failure naming the harness, the node and the fix when a session's
   * preset cannot run in this host's local runtime; does nothing for other harnesses and runtimes.
   */
  require(agent: AgentSpec, runtime: RuntimeSpec, nodeId: string): void {
    const name = agent.harness;
    if (!name || name === "shell" || agent.import_path !== undefined) return;
    if (runtime.backend !== "local" || runtime.import_path !== undefined) return;
    const check = this.check(name, { install: agent.settings.install !== false });
    if (check.available) return;
    throw new SessionFailure(
      "configuration",
      `agent.harness: '${name}' is not available on gateway node '${nodeId}': ${check.reason}. Fix: ${check.fix}; or run the task in a container runtime whose image has the CLI`,
    );
  }

  /** Why a per-session install of `via` packages cannot work here, or null when it can. */
  private installBlocked(via: "npm" | "pip"): string | null {
    if (this.host.sandboxed)
      return "local sessions run in bubblewrap, where the host filesystem is read-only (and offline sessions have no network)";
    if (!this.installProbe.has(via)) this.installProbe.set(via, this.probeInstaller(via));
    return this.installProbe.get(via) ?? null;
  }

  private probeInstaller(via: "npm" | "pip"): string | null {
    const env = baseEnv(this.env);
    const pathVar = env.PATH ?? "";
    if (via === "pip") {
      return which("pip", pathVar) || which("pip3", pathVar)
        ? null
        : "neither pip nor pip3 is on the sessions' PATH";
    }
    if (!which("npm", pathVar)) return "npm is not on the sessions' PATH";
    let prefix: string;
    try {
      prefix = execFileSync("npm", ["prefix", "-g"], { env, encoding: "utf8", timeout: 30_000 }).trim();
    } catch {
      return "`npm prefix -g` failed";
    }
    // `npm install -g` writes the package under lib/node_modules and links its bin.
    const targets = [path.join(prefix, "lib", "node_modules"), path.join(prefix, "bin")];
    const denied = targets.filter((dir) => !writable(existingAncestor(dir)));
    return denied.length ? `npm's global prefix is not writable (${denied.join(", ")})` : null;
  }
}

function realOrSelf(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return file;
  }
}

/** The nearest folder of `dir` that exists (npm creates the rest). */
function existingAncestor(dir: string): string {
  let d = dir;
  for (;;) {
    try {
      statSync(d);
      return d;
    } catch {
      const up = path.dirname(d);
      if (up === d) return d;
      d = up;
    }
  }
}
