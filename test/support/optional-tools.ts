/**
 * Optional system tools of the test suites (bubblewrap, podman, socat, python3, pytest, writable
 * cgroups, Python packages, …) and the one way a suite that needs one is declared.
 *
 * A suite or test declared with {@link describeWith} / {@link itWith} runs when every tool it
 * needs works here. When one does not, it is skipped, and the skip is recorded in the task's
 * `meta` (which vitest carries from every worker process, and the workers pool, to the reporters),
 * so `OptionalToolsReporter` prints one line per missing tool at the end of the run: the tool, the
 * suites skipped for it, why, and how to install it. With `POLAR_TEST_REQUIRE_ALL=1` (CI) the same
 * suite FAILS instead, with that reason: coverage cannot drop silently.
 *
 * Every probe runs the tool (a file on PATH that cannot execute, or a sandbox that cannot start,
 * counts as missing); results are cached per process.
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { describe, it, type TestOptions } from "vitest";
import { TORCH_INSTALL_SCRIPT, torchProblem } from "../../cli/reference-engine";
import { bwrapArgs } from "../../gateway-agent/runtime/bwrap";
import { detectLimits } from "../../gateway-agent/runtime/limits";
import { ensureTestImage, TEST_IMAGE } from "../../gateway-agent/testing/images";
import { type EnsureHarnessesResult, INSTALL_SCRIPT } from "../../scripts/ensure-harnesses";
import { type MissingTool, type OptionalToolsMeta, STRICT_ENV } from "./optional-tools-meta";

export { type MissingTool, type OptionalToolsMeta, STRICT_ENV };

/** A tool some suites need: how to check it works here, and how to get it. */
export interface OptionalTool {
  /** Name in the summary (`bubblewrap`, `pytest`, …); probes with the same name share a line. */
  name: string;
  /** The command that installs it, as a user would type it. */
  install: string;
  /** Null when the tool works here, else why not (one line). */
  probe: () => string | null;
}

/**
 * Runs `cmd args` and says why it does not work (null when it exits 0).
 *
 * @example
 * ```ts
 * runs("socat", ["-V"]); // null, or "`socat` is not installed (not on PATH)"
 * ```
 */
export function runs(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): string | null {
  const r = spawnSync(cmd, args, { env, stdio: ["ignore", "ignore", "pipe"], timeout: 30_000 });
  const code = (r.error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOENT") return `\`${cmd}\` is not installed (not on PATH)`;
  if (code === "EACCES") return `\`${cmd}\` is on PATH but cannot be executed`;
  if (r.error) return `\`${cmd}\` cannot be run: ${r.error.message}`;
  if (r.status === 0) return null;
  const err = r.stderr.toString().trim().split("\n").at(-1) ?? "";
  return `\`${[cmd, ...args].join(" ")}\` ${r.status === null ? `was killed (${r.signal})` : `exited with ${r.status}`}${err ? `: ${err}` : ""}`;
}

/**
 * A Python package importable by the host's `python3` (`install` defaults to `pip install <pipName>`;
 * a suite that pins its versions names its requirements file instead).
 *
 * @example
 * ```ts
 * describeWith([pythonModule("openai")], "the official openai SDK through the proxy", () => {});
 * pythonModule("google.genai", "google-genai", "pip install -r requirements.txt").name; // "python package google-genai"
 * ```
 */
export function pythonModule(
  module: string,
  pipName = module,
  install = `pip install ${pipName}`,
): OptionalTool {
  return {
    name: `python package ${pipName}`,
    install,
    probe: () => runs("python3", ["--version"]) ?? runs("python3", ["-c", `import ${module}`]),
  };
}

/**
 * The pinned harness CLIs as `ensureHarnesses` left them: missing, with the install's reason,
 * when it could not install them (no npm registry).
 *
 * @example
 * ```ts
 * const install = await ensureHarnesses(["pi"]);
 * describeWith([harnessClis(install)], "pi end to end", () => {});
 * ```
 */
export function harnessClis(install: EnsureHarnessesResult): OptionalTool {
  return {
    name: "harness CLIs",
    install: `${INSTALL_SCRIPT} (needs the npm registry)`,
    probe: () => (install.ok ? null : (install.reason ?? `${INSTALL_SCRIPT} did not install them`)),
  };
}

function podmanProblem(): string | null {
  const tools =
    runs("podman", ["--version"]) ??
    runs("/usr/sbin/runc", ["--version"]) ??
    runs("busybox", ["true"]) ??
    runs("git", ["--version"]);
  if (tools) return tools;
  try {
    ensureTestImage();
    return null;
  } catch (err) {
    return `cannot build the test image ${TEST_IMAGE}: ${(err as Error).message.split("\n")[0]}`;
  }
}

// `--version` works without user namespaces; a real (empty) sandbox is what the suites need.
const bwrapProblem = () => runs("bwrap", ["--ro-bind", "/", "/", "--dev", "/dev", "true"]);
const hostPytestProblem = (env: NodeJS.ProcessEnv = process.env) =>
  runs("python3", ["--version"], env) ?? runs("python3", ["-m", "pytest", "--version"], env);

/**
 * Why `python3 -m pytest` does not run where the local runtime's sessions run it (null when it
 * does): inside the bubblewrap sandbox when bubblewrap works here, which hides the gateway user's
 * home (so a pyenv or `pip --user` pytest does not count), else on the host.
 *
 * @example
 * ```ts
 * sandboxPytestProblem(); // null where Debian's python3-pytest is installed
 * ```
 */
export function sandboxPytestProblem(env: NodeJS.ProcessEnv = process.env): string | null {
  if (bwrapProblem() !== null) return hostPytestProblem(env);
  const dir = mkdtempSync(path.join(tmpdir(), "polar-pytest-probe-"));
  try {
    const home = env.HOME ?? os.homedir();
    const plan = {
      bwrapPath: "bwrap",
      sessionDir: dir,
      workRoot: dir,
      cwd: dir,
      allowInternet: true,
      hostHome: home,
    };
    const [cmd, ...argv] = bwrapArgs(plan, "python3 -m pytest --version");
    const r = spawnSync(cmd as string, argv, { env, stdio: ["ignore", "ignore", "pipe"], timeout: 30_000 });
    if (r.status === 0) return null;
    const err = r.stderr.toString().trim().split("\n").at(-1) ?? "";
    return `\`python3 -m pytest\` does not run in the bubblewrap sandbox (which hides ${home})${err ? `: ${err}` : ""}`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The Chromium binary the browser tests drive: `POLAR_CHROMIUM`, else `chromium` on PATH.
 *
 * @example
 * ```ts
 * chromium.launch({ executablePath: chromiumPath() });
 * ```
 */
export function chromiumPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.POLAR_CHROMIUM) return env.POLAR_CHROMIUM;
  // An absolute path: the browser launcher does not search PATH itself.
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    const candidate = path.join(dir, "chromium");
    if (dir && existsSync(candidate)) return candidate;
  }
  return "chromium";
}

/** Debian's libfaketime (package `faketime`): preloaded, it moves a process's wall clock. */
export const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/** The tools the suites of this repository probe, by name. */
export const TOOLS = {
  bubblewrap: { name: "bubblewrap", install: "apt-get install bubblewrap", probe: bwrapProblem },
  podman: {
    name: "podman",
    install: "apt-get install podman runc busybox-static",
    // podman with runc, and the busybox+git test image built locally from the host's binaries.
    probe: podmanProblem,
  },
  socat: { name: "socat", install: "apt-get install socat", probe: () => runs("socat", ["-V"]) },
  // The gateway benchmark's token-mode sessions talk to the proxy with curl and jq.
  jq: {
    name: "jq",
    install: "apt-get install jq curl",
    probe: () => runs("jq", ["--version"]) ?? runs("curl", ["--version"]),
  },
  // Debian's prometheus package ships promtool, the checker of the metrics exposition format.
  promtool: {
    name: "promtool",
    install: "apt-get install prometheus",
    probe: () => runs("promtool", ["--version"]),
  },
  python3: {
    name: "python3",
    install: "apt-get install python3",
    probe: () => runs("python3", ["--version"]),
  },
  pip: {
    name: "pip",
    install: "apt-get install python3-pip",
    probe: () => runs("python3", ["-m", "pip", "--version"]),
  },
  pytest: { name: "pytest", install: "pip install pytest", probe: () => hostPytestProblem() },
  sandboxPytest: {
    name: "pytest in the sandbox",
    // The system's python3 is what the sandbox shows: its package, not a pip install in the home.
    install: "apt-get install python3-pytest",
    probe: () => sandboxPytestProblem(),
  },
  torch: {
    name: "torch",
    // The reference engine's Python: .polar/torch-venv (or POLAR_TORCH_PYTHON) with torch and transformers.
    install: `bash ${TORCH_INSTALL_SCRIPT}`,
    probe: () => torchProblem(),
  },
  chromium: {
    name: "chromium",
    // The browser tests (test/browser/) drive the system's Chromium with playwright-core;
    // POLAR_CHROMIUM names another binary.
    install: "apt-get install chromium",
    probe: () => runs(chromiumPath(), ["--headless", "--version"]),
  },
  faketime: {
    name: "faketime",
    // The fault matrix runs one gateway with its wall clock minutes ahead (libfaketime preloaded).
    install: "apt-get install faketime",
    probe: () => (existsSync(LIBFAKETIME) ? null : `${LIBFAKETIME} is missing`),
  },
  cgroups: {
    name: "cgroups",
    install:
      "run the tests as root, or in a delegated cgroup: systemd-run --user --scope -p Delegate=yes npm test",
    probe: () => {
      const s = detectLimits();
      return s.mechanism === "rlimit" ? `no writable cgroup with memory, cpu and pids (${s.detail})` : null;
    },
  },
} satisfies Record<string, OptionalTool>;

/** A tool by its name in {@link TOOLS}, or a tool of the suite's own. */
export type Need = keyof typeof TOOLS | OptionalTool;

/** What a suite needs: tools it cannot run without, and tools it can run without (saying what is lost). */
export interface Needs {
  require?: Need[];
  prefer?: Array<{ tool: Need; without: string }>;
}

const probed = new Map<OptionalTool, string | null>();

/** Folder where one test run's processes share the tools found working (set by vitest.config.ts). */
export const PROBE_CACHE_ENV = "POLAR_TEST_PROBE_CACHE";

/**
 * A named tool's probe, shared by the test files of one run: each file runs in a process of its
 * own, and some probes cost seconds of CPU (`import torch, transformers` about 6 s). A tool found
 * working is written to {@link PROBE_CACHE_ENV}'s folder and not probed again in that run; a
 * missing one is probed again by every file (it may have been installed meanwhile).
 *
 * @example
 * ```ts
 * probeShared("torch", TOOLS.torch); // null, from the run's note when another file found it working
 * ```
 */
export function probeShared(name: string, tool: OptionalTool): string | null {
  const dir = process.env[PROBE_CACHE_ENV];
  const file = dir ? path.join(dir, `${name}.ok`) : null;
  if (file && existsSync(file)) return null;
  const reason = tool.probe();
  if (file && reason === null) {
    try {
      writeFileSync(file, "");
    } catch {
      // the folder is gone: the next file probes again
    }
  }
  return reason;
}

/**
 * Why `need` does not work here (null when it does); cached per process for each tool object.
 *
 * @example
 * ```ts
 * probe("bubblewrap"); // null where bwrap can start a sandbox
 * ```
 */
export function probe(need: Need): MissingTool | null {
  const tool = typeof need === "string" ? TOOLS[need] : need;
  if (!probed.has(tool)) probed.set(tool, typeof need === "string" ? probeShared(need, tool) : tool.probe());
  const reason = probed.get(tool) ?? null;
  return reason === null ? null : { tool: tool.name, install: tool.install, reason };
}

/** True when missing tools fail their suites (`POLAR_TEST_REQUIRE_ALL=1`). */
export function strictMode(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env[STRICT_ENV];
  return v !== undefined && v !== "" && v !== "0" && v !== "false";
}

/** A required tool that is missing in strict mode. */
export class MissingToolError extends Error {
  constructor(readonly missing: MissingTool[]) {
    super(
      `${missing.map((m) => `${m.tool} is required (${STRICT_ENV}=1) but unavailable: ${m.reason}; install: ${m.install}`).join("; ")}`,
    );
    this.name = "MissingToolError";
  }
}

/** How a suite declared with `needs` runs here. */
export interface Plan {
  mode: "run" | "skip" | "fail";
  meta?: OptionalToolsMeta;
}

/**
 * Decides whether a suite runs, is skipped or fails, and what it records.
 *
 * @example
 * ```ts
 * planFor({ require: ["bubblewrap"] }, "sandbox", false).mode; // "skip" where bwrap is missing
 * ```
 */
export function planFor(needs: Need[] | Needs, label: string, strict = strictMode()): Plan {
  const n: Needs = Array.isArray(needs) ? { require: needs } : needs;
  const required = (n.require ?? []).map(probe).filter((m): m is MissingTool => m !== null);
  const preferred = (n.prefer ?? []).flatMap(({ tool, without }) => {
    const m = probe(tool);
    return m ? [{ ...m, without }] : [];
  });
  if (strict && required.length + preferred.length > 0)
    return { mode: "fail", meta: { state: "failed", label, missing: [...required, ...preferred] } };
  if (required.length > 0) return { mode: "skip", meta: { state: "skipped", label, missing: required } };
  if (preferred.length > 0) return { mode: "run", meta: { state: "degraded", label, missing: preferred } };
  return { mode: "run" };
}

type Body = () => void;
type TestBody = () => unknown;

function args<F>(optionsOrFn: TestOptions | F, fn?: F): [TestOptions, F] {
  return typeof optionsOrFn === "function" ? [{}, optionsOrFn as F] : [optionsOrFn as TestOptions, fn as F];
}

function withMeta(options: TestOptions, plan: Plan): TestOptions {
  return plan.meta ? { ...options, meta: { ...options.meta, optionalTools: plan.meta } } : options;
}

/**
 * `describe` for a suite that needs optional tools: runs, skips (recorded for the summary) or,
 * under `POLAR_TEST_REQUIRE_ALL=1`, fails with the missing tool and its install command.
 *
 * @example
 * ```ts
 * describeWith(["bubblewrap"], "sessions in the bubblewrap sandbox", { timeout: 60_000 }, () => {
 *   it("…", async () => {});
 * });
 * ```
 */
export function describeWith(needs: Need[] | Needs, name: string, fn: Body): void;
export function describeWith(needs: Need[] | Needs, name: string, options: TestOptions, fn: Body): void;
export function describeWith(
  needs: Need[] | Needs,
  name: string,
  optionsOrFn: TestOptions | Body,
  maybeFn?: Body,
): void {
  const [options, fn] = args(optionsOrFn, maybeFn);
  const plan = planFor(needs, name);
  const opts = withMeta(options, plan);
  if (plan.mode === "run") describe(name, opts, fn);
  else if (plan.mode === "skip") describe.skip(name, opts, fn);
  else
    describe(name, opts, () => {
      it(`needs ${plan.meta!.missing.map((m) => m.tool).join(", ")}`, () => {
        throw new MissingToolError(plan.meta!.missing);
      });
    });
}

/**
 * `it` for a single test that needs optional tools (same rules as {@link describeWith}).
 *
 * @example
 * ```ts
 * itWith(["socat"], "socat in the image: the same through socat", async () => {});
 * ```
 */
export function itWith(needs: Need[] | Needs, name: string, fn: TestBody): void;
export function itWith(needs: Need[] | Needs, name: string, options: TestOptions, fn: TestBody): void;
export function itWith(
  needs: Need[] | Needs,
  name: string,
  optionsOrFn: TestOptions | TestBody,
  maybeFn?: TestBody,
): void {
  const [options, fn] = args(optionsOrFn, maybeFn);
  const plan = planFor(needs, name);
  const opts = withMeta(options, plan);
  if (plan.mode === "run") it(name, opts, fn);
  else if (plan.mode === "skip") it.skip(name, opts, fn);
  else
    it(name, opts, () => {
      throw new MissingToolError(plan.meta!.missing);
    });
}

/**
 * `describe.each(cases)(name, fn)` for suites that need optional tools: one {@link describeWith}
 * suite per case, `%s` in the name replaced by the case.
 *
 * @example
 * ```ts
 * describeEachWith(["bubblewrap"], ["pi", "codex"])("%s in the sandbox", (harness) => {
 *   it("runs", () => {});
 * });
 * ```
 */
export function describeEachWith<T>(
  needs: Need[] | Needs,
  cases: readonly T[],
): (name: string, fn: (item: T) => void) => void {
  return (name, fn) => {
    for (const item of cases) describeWith(needs, name.replace("%s", String(item)), () => fn(item));
  };
}
