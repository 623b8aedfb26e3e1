/**
 * Patch handling of the patch evaluators: extract the agent's diff, drop excluded paths, apply it
 * in the grading runtime (`git apply` then `patch` fallback), and parse test output lines.
 *
 * @module
 */
import { constants } from "node:fs";
import { lstat, mkdir, open, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { SessionFailure } from "../errors";
import { hostPathOf } from "../runtime/prepare";
import type { Runtime } from "../runtime/types";
import { parseDiff, sectionPaths } from "./diff-sections";

/** Paths always excluded from an extracted patch (upstream defaults). */
export const DEFAULT_EXCLUDE_PATTERNS = ["__pycache__", "*.pyc", ".pytest_cache"];
/**
 * Upstream's default `patch_command`, with external diff programs and textconv drivers off: the
 * agent's repository configuration must not be able to print a diff of its choosing.
 */
export const DEFAULT_PATCH_COMMAND = "git diff --binary --no-ext-diff --no-textconv --submodule=diff";

/** Glob (`*`, `**`, `?`) to a regular expression over a whole path. */
function globToRegExp(glob: string): RegExp {
  let re = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i] as string;
    if (c === "*") {
      if (glob[i + 1] === "*") {
        re += ".*";
        i++;
        if (glob[i + 1] === "/") i++;
      } else re += "[^/]*";
    } else if (c === "?") re += "[^/]";
    else re += c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/**
 * True when `file` matches a pattern: as a whole path, or any of its path components
 * (so `__pycache__` excludes every file under such a folder, `*.pyc` every compiled file).
 *
 * @example
 * ```ts
 * isExcluded("pkg/__pycache__/m.cpython-311.pyc", ["__pycache__"]); // true
 * ```
 */
export function isExcluded(file: string, patterns: readonly string[]): boolean {
  const parts = file.split("/");
  return patterns.some((p) => {
    const re = globToRegExp(p);
    return re.test(file) || parts.some((part) => re.test(part));
  });
}

/**
 * Drops the file sections of a git diff whose path (old or new, or any name the section
 * mentions) is excluded.
 *
 * @example
 * ```ts
 * const { patch, excluded } = filterPatch(diff, ["*.log"]);
 * ```
 */
export function filterPatch(
  diff: string,
  patterns: readonly string[],
): { patch: string; excluded: string[] } {
  const kept: string[] = [];
  const excluded: string[] = [];
  for (const section of parseDiff(diff)) {
    const paths = sectionPaths(section);
    if (paths.some((p) => isExcluded(p, patterns))) excluded.push(section.newPath ?? section.oldPath ?? "");
    else kept.push(section.text);
  }
  const patch = kept.join("");
  return { patch: patch && !patch.endsWith("\n") ? `${patch}\n` : patch, excluded };
}

/** Reads a string list or a JSON-encoded string list from config (SWE-bench rows store both). */
export function stringListOf(value: unknown, field: string): string[] {
  let v = value;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      throw new SessionFailure("configuration", `${field}: not a JSON list`);
    }
  }
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string"))
    throw new SessionFailure("configuration", `${field}: must be a list of strings`);
  return v as string[];
}

/** Patch evaluator settings shared by `test_on_output` and `swebench_harness`. */
export interface PatchConfig {
  repoDir: string;
  patchCommand: string;
  applyTimeoutMs: number;
  excludePatterns: string[];
}

/** Reads the shared keys with defaults; errors name the key. */
export function patchConfig(config: Record<string, unknown>, defaultRepoDir: string): PatchConfig {
  const str = (k: string, d: string) => {
    const v = config[k];
    if (v === undefined) return d;
    if (typeof v !== "string" || !v)
      throw new SessionFailure("configuration", `evaluator.config.${k}: must be a non-empty string`);
    return v;
  };
  const num = (k: string, d: number) => {
    const v = config[k];
    if (v === undefined) return d;
    if (typeof v !== "number" || !(v > 0))
      throw new SessionFailure("configuration", `evaluator.config.${k}: must be a positive number`);
    return v;
  };
  return {
    repoDir: str("repo_dir", defaultRepoDir),
    patchCommand: str("patch_command", DEFAULT_PATCH_COMMAND),
    applyTimeoutMs: num("apply_timeout", 60) * 1000,
    excludePatterns: [
      ...DEFAULT_EXCLUDE_PATTERNS,
      ...(config.exclude_patterns === undefined
        ? []
        : stringListOf(config.exclude_patterns, "evaluator.config.exclude_patterns")),
    ],
  };
}

/**
 * Runs `patch_command` in the agent's runtime, filters it, and saves `artifacts/patch.diff` on
 * the host. Throws when the command fails (an evaluation error, not an empty patch).
 *
 * @example
 * ```ts
 * const { patch } = await extractPatch(runtime, cfg, env, signal);
 * ```
 */
export async function extractPatch(
  runtime: Runtime,
  cfg: PatchConfig,
  env: Record<string, string>,
  signal: AbortSignal,
): Promise<{ patch: string; excluded: string[]; hostPath: string }> {
  const r = await runtime.exec(cfg.patchCommand, {
    env,
    cwd: cfg.repoDir,
    signal,
    timeoutMs: cfg.applyTimeoutMs,
    logName: "eval-extract-patch",
    capture: true,
  });
  if (r.interrupted) throw signal.reason;
  if (r.exitCode !== 0)
    throw new SessionFailure(
      "infra",
      `patch_command failed with exit ${r.exitCode ?? r.signal} in ${cfg.repoDir}`,
    );
  const filtered = filterPatch(r.stdout ?? "", cfg.excludePatterns);
  const hostPath = path.join(runtime.hostDir, "artifacts", "patch.diff");
  await writeGraderFile(hostPath, filtered.patch);
  return { ...filtered, hostPath };
}

/** Folders of a session that the gateway writes into on the host. */
const GRADER_DIRS = ["artifacts", "logs"];

/**
 * Grader files of the agent's session folder that are not what the gateway made: `artifacts/`
 * or `logs/` replaced by a symlink or a file, or a symlink planted inside them. The gateway
 * writes there on the host with its own rights, so a planted link would aim its writes anywhere.
 * Each one found is removed (and the folder made again), so the grading that follows is safe.
 *
 * @example
 * ```ts
 * const tampered = await checkGraderFiles(runtime); // ["artifacts/patch.diff -> symlink"]
 * ```
 */
export async function checkGraderFiles(runtime: Runtime): Promise<string[]> {
  const found: string[] = [];
  for (const dir of GRADER_DIRS) {
    const full = path.join(runtime.hostDir, dir);
    const info = await lstat(full).catch(() => null);
    if (info && !info.isDirectory()) {
      found.push(`${dir} (${info.isSymbolicLink() ? "symlink" : "not a folder"})`);
      await rm(full, { force: true, recursive: true });
    }
    await mkdir(full, { recursive: true });
    for (const entry of await readdir(full, { withFileTypes: true })) {
      if (!entry.isSymbolicLink()) continue;
      found.push(`${dir}/${entry.name} (symlink)`);
      await rm(path.join(full, entry.name), { force: true });
    }
  }
  return found;
}

/**
 * Writes a file the gateway owns inside a session folder without following a symlink someone
 * planted at its path (the write fails instead).
 *
 * @example
 * ```ts
 * await writeGraderFile(path.join(runtime.hostDir, "artifacts", "patch.diff"), patch);
 * ```
 */
export async function writeGraderFile(hostPath: string, content: string): Promise<void> {
  await mkdir(path.dirname(hostPath), { recursive: true });
  const dir = await lstat(path.dirname(hostPath));
  if (!dir.isDirectory()) throw new SessionFailure("infra", `${path.dirname(hostPath)} is not a folder`);
  const handle = await open(
    hostPath,
    constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
    0o644,
  ).catch((e: NodeJS.ErrnoException) => {
    throw new SessionFailure("infra", `cannot write ${hostPath} (${e.code}): not a regular file`);
  });
  try {
    await handle.writeFile(content);
  } finally {
    await handle.close();
  }
}

/** Markers printed around the apply attempts, so the log tells which one worked. */
export const APPLY_OK = "POLAR_APPLY_OK";

/**
 * Applies a patch in `runtime` at `repoDir`: `git apply -v`, else `patch --batch --fuzz=5 -p1`.
 *
 * @example
 * ```ts
 * const applied = await applyPatch(evalRuntime, patch, cfg, env, signal);
 * ```
 */
export async function applyPatch(
  runtime: Runtime,
  patch: string,
  cfg: PatchConfig,
  env: Record<string, string>,
  signal: AbortSignal,
  name = "patch.diff",
): Promise<{ applied: boolean; method: "git" | "patch" | null }> {
  const inside = `${runtime.sessionPath}/artifacts/${name}`;
  const host = hostPathOf(runtime, inside);
  if (!host) throw new SessionFailure("infra", "eval runtime has no session folder for the patch");
  await writeGraderFile(host, patch);
  const command = [
    `if git apply -v '${inside}'; then echo ${APPLY_OK}=git;`,
    `elif patch --batch --fuzz=5 -p1 -i '${inside}'; then echo ${APPLY_OK}=patch;`,
    "else exit 1; fi",
  ].join(" ");
  const r = await runtime.exec(command, {
    env,
    cwd: cfg.repoDir,
    signal,
    timeoutMs: cfg.applyTimeoutMs,
    logName: "eval-apply-patch",
    capture: true,
  });
  if (r.interrupted) throw signal.reason;
  const m = new RegExp(`${APPLY_OK}=(git|patch)`).exec(r.stdout ?? "");
  if (r.exitCode !== 0 || !m) return { applied: false, method: null };
  return { applied: true, method: m[1] as "git" | "patch" };
}

/** ANSI colour/cursor sequences (ESC [ … letter), stripped from test output before parsing. */
export const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[A-Za-z]`, "g");

/**
 * Normalises a test id the way upstream does: `path.py::Class::method[p]` → `Class.method[p]`,
 * `path.py::func` → `func`; ids without `::` are kept.
 */
export function normalizeTestId(id: string): string {
  const parts = id.split("::");
  return parts.length > 1 ? parts.slice(1).join(".") : id;
}

/**
 * Parses `PASSED|FAILED|ERROR|SKIPPED <test id>` lines (ANSI colours stripped) into a map;
 * later lines win (pytest's `-rA` summary comes last).
 *
 * @example
 * ```ts
 * parseTestStatusLines("PASSED tests/t.py::test_add\nFAILED tests/t.py::test_div - ZeroDivisionError");
 * // { test_add: "PASSED", test_div: "FAILED" }
 * ```
 */
export function parseTestStatusLines(output: string, normalize = true): Record<string, string> {
  const map: Record<string, string> = {};
  for (const raw of output.split("\n")) {
    const line = raw.replace(ANSI, "").trim();
    const m = /^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+)/.exec(line);
    if (!m) continue;
    const id = m[2] as string;
    map[normalize ? normalizeTestId(id) : id] = m[1] as string;
  }
  return map;
}
