/**
 * The doc test's methods that check a command without running it against the local stack:
 *
 * - `cli`: a synopsis (`npx polar dev [--port 8787] …`). Parsed by the real command tree of
 *   `cli/main.ts` (commander, actions replaced by no-ops): the subcommand, every flag and the
 *   argument count must be accepted. `[…]` parts are included, `a|b` alternatives each parsed,
 *   the placeholder `N` read as 1; `VAR=…` prefixes must name variables the code reads.
 * - `ci`: a command `.ci/run` executes (`npm ci`, `npm test`, `npm run lint`, …). `npm install`
 *   counts as CI's `npm ci` (the same lockfile, installed exactly); `npm run test:X` as the
 *   project X of CI's `npm test`.
 * - `apt`: `apt-get install` of packages `.ci/run` installs.
 * - `account`: what needs a Cloudflare account. `npx wrangler SUB…` must exist in the pinned
 *   wrangler (`--help` exits 0), `r2 bucket create NAME` must name the bucket of `wrangler.toml`,
 *   `polar deploy` really bundles with `--dry-run`. Limit: nothing is deployed or logged in.
 * - `covered FILE`: run by FILE, a test of a vitest project CI runs, which must use the script the
 *   command runs (or the deploy/ file, or the gateway package it names). Limit: the command line
 *   itself is not executed here.
 * - `syntax REASON`: `bash -n` only, for commands that need what no test machine has (REASON
 *   says what: a GPU host, hundreds of GB of images, …).
 *
 * @module
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { type Command, CommanderError } from "commander";
import { execa } from "execa";
import { parse as parseToml } from "smol-toml";
import { program } from "../../cli/main";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { DocCommand } from "./doc-blocks";

/** Splits a command into words: whitespace outside quotes separates, quotes are removed. */
export function words(text: string): string[] {
  const out: string[] = [];
  let cur = "";
  let quote: string | null = null;
  let has = false;
  for (const c of text) {
    if (quote) {
      if (c === quote) quote = null;
      else cur += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      has = true;
    } else if (/\s/.test(c)) {
      if (cur || has) out.push(cur);
      cur = "";
      has = false;
    } else cur += c;
  }
  if (cur || has) out.push(cur);
  return out;
}

/** `A=1 B=2 cmd …` → the assignments and the rest. */
export function splitEnv(ws: string[]): { env: string[]; rest: string[] } {
  let i = 0;
  while (i < ws.length && /^[A-Za-z_][A-Za-z0-9_]*=/.test(ws[i]!)) i++;
  return { env: ws.slice(0, i).map((w) => w.split("=")[0]!), rest: ws.slice(i) };
}

/** Source of the parts that read environment variables, to check documented `VAR=` names. */
let codeText: string | null = null;
function codeMentions(name: string): boolean {
  codeText ??= ["cli", "gateway-agent", "proxy", "sim", "scripts"]
    .flatMap((dir) =>
      readdirRecursive(join(REPO_ROOT, dir)).filter((f) => /\.(ts|mjs|sh)$/.test(f) && !f.includes(".test.")),
    )
    .map((f) => readFileSync(f, "utf8"))
    .join("\n");
  return codeText.includes(name);
}

function readdirRecursive(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? readdirRecursive(p) : [p];
  });
}

let prepared = false;
/** Makes the command tree parse without side effects: no exit, no output, no-op actions. */
function prepareProgram(): void {
  if (prepared) return;
  prepared = true;
  const visit = (cmd: Command) => {
    cmd.exitOverride();
    cmd.configureOutput({ writeOut: () => {}, writeErr: () => {} });
    if (cmd.commands.length === 0) cmd.action(() => {});
    for (const sub of cmd.commands) visit(sub);
  };
  visit(program);
}

/** Every argv a synopsis stands for: optional parts in, one argv per `a|b` alternative. */
export function synopsisArgvs(ws: string[]): string[][] {
  let argvs: string[][] = [[]];
  for (const w of ws.map((x) => x.replace(/[[\]]/g, "")).filter(Boolean)) {
    const alternatives = w.includes("|") && !w.includes("{{") ? w.split("|").filter(Boolean) : [w];
    const values = alternatives.map((a) => (a === "N" ? "1" : a));
    argvs = argvs.flatMap((argv) => values.map((v) => [...argv, v]));
  }
  return argvs;
}

/**
 * `cli`: the synopsis parses with the real `polar` command tree (every alternative).
 *
 * @example
 * ```ts
 * await checkSynopsis(command); // throws naming the flag commander refused
 * ```
 */
export async function checkSynopsis(command: DocCommand): Promise<string> {
  const ws = words(command.text);
  const exported = ws[0] === "export";
  const { env, rest } = splitEnv(exported ? ws.slice(1) : ws);
  for (const name of env)
    if (!codeMentions(name)) throw new Error(`${name}: no part of the code reads this variable`);
  if (exported && rest.length === 0) return `exports ${env.join(", ")}, variables the code reads`;
  const start = rest[0] === "npx" && rest[1] === "polar" ? 2 : rest[0] === "polar" ? 1 : -1;
  if (start < 0) throw new Error("a `cli` line must be a `npx polar …` command");
  prepareProgram();
  const argvs = synopsisArgvs(rest.slice(start));
  for (const argv of argvs) {
    try {
      await program.parseAsync(argv, { from: "user" });
    } catch (err) {
      if (err instanceof CommanderError)
        throw new Error(
          `polar ${argv.join(" ")}: the CLI refuses it: ${err.message.replace(/^error: /, "")}`,
        );
      throw err;
    }
  }
  return `parsed by the polar CLI (${argvs.length} form${argvs.length > 1 ? "s" : ""})`;
}

function ciScript(): string[] {
  return readFileSync(join(REPO_ROOT, ".ci/run"), "utf8")
    .split("\n")
    .map((l) => l.replace(/(^|\s)#.*$/, "").trim())
    .filter(Boolean);
}

function ciRuns(fragment: string): boolean {
  return ciScript().some((l) => l.includes(fragment));
}

function packageScripts(): Record<string, string> {
  return (
    JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> }
  ).scripts;
}

/**
 * `ci`: the command is one `.ci/run` executes.
 *
 * @example
 * ```ts
 * checkCi(command); // "npm test: .ci/run runs it"
 * ```
 */
export function checkCi(command: DocCommand): string {
  const ws = splitEnv(words(command.text)).rest;
  const scripts = packageScripts();
  if (ws[0] === "npm" && ws[1] === "install" && ws.length === 2) {
    if (!ciRuns("npm ci")) throw new Error(".ci/run does not run `npm ci`");
    return "CI runs `npm ci`: the same lockfile, installed exactly";
  }
  if (ws[0] === "npm" && (ws[1] === "ci" || ws[1] === "test") && ws.length <= 4) {
    if (ws[1] === "test" && !scripts.test) throw new Error("package.json has no test script");
    if (!ciRuns(`npm ${ws[1]}`)) throw new Error(`.ci/run does not run \`npm ${ws[1]}\``);
    return `.ci/run runs \`npm ${ws[1]}\``;
  }
  if (ws[0] === "npm" && ws[1] === "run" && ws[2]) {
    const script = scripts[ws[2]];
    if (!script) throw new Error(`package.json has no script '${ws[2]}'`);
    if (ciRuns(`npm run ${ws[2]}`)) return `.ci/run runs \`npm run ${ws[2]}\``;
    // `vitest run --project A [--project B …]`: projects of the `npm test` CI runs.
    const projects = /^vitest run( --project \S+)+$/.test(script)
      ? [...script.matchAll(/--project (\S+)/g)].map((m) => m[1]!)
      : [];
    const config = readFileSync(join(REPO_ROOT, "vitest.config.ts"), "utf8");
    if (
      projects.length > 0 &&
      scripts.test === "vitest run" &&
      ciRuns("npm test") &&
      projects.every((p) => config.includes(`name: "${p}"`))
    )
      return `${projects.length === 1 ? "one project" : "projects"} (${projects.join(", ")}) of the \`npm test\` that .ci/run runs`;
    throw new Error(`.ci/run does not run \`npm run ${ws[2]}\` (nor is it a project of its \`npm test\`)`);
  }
  const script = ws[0] === "bash" ? ws[1] : ws[0];
  if (script?.startsWith("scripts/")) {
    readFileSync(join(REPO_ROOT, script)); // exists
    if (!ciRuns(script)) throw new Error(`.ci/run does not run ${script}`);
    return `.ci/run runs ${script}`;
  }
  throw new Error("not a command .ci/run runs (npm ci / npm test / npm run X / scripts/…)");
}

/**
 * `apt`: every package named is one `.ci/run` installs.
 *
 * @example
 * ```ts
 * checkApt(command); // throws naming a package CI does not install
 * ```
 */
export function checkApt(command: DocCommand): string {
  const ws = words(command.text).filter((w) => w !== "sudo");
  if (ws[0] !== "apt-get" && ws[0] !== "apt") throw new Error("an `apt` line must be `apt-get install …`");
  const pkgs = ws.slice(ws.indexOf("install") + 1).filter((w) => !w.startsWith("-"));
  const ci = ciScript().find((l) => /apt-get install/.test(l));
  if (!ci) throw new Error(".ci/run installs no apt packages");
  const installed = new Set(
    words(ci.slice(ci.indexOf("apt-get install") + "apt-get install".length)).filter(
      (w) => !w.startsWith("-") && /^[a-z0-9][a-z0-9.+-]*$/.test(w),
    ),
  );
  const missing = pkgs.filter((p) => !installed.has(p));
  if (missing.length) throw new Error(`.ci/run does not install ${missing.join(", ")}`);
  return `.ci/run installs ${pkgs.join(", ")}`;
}

/** One `deploy --dry-run` per test run: it bundles the whole Worker (several seconds). */
let dryRun: Promise<string> | null = null;

async function exits0(file: string, args: string[]): Promise<void> {
  const r = await execa(file, args, {
    cwd: REPO_ROOT,
    reject: false,
    all: true,
    timeout: 120_000,
    env: { WRANGLER_SEND_METRICS: "false", CI: "true", NO_COLOR: "1" },
  });
  if (r.exitCode !== 0) throw new Error(`${[file, ...args].join(" ")} exited ${r.exitCode}:\n${r.all}`);
}

/**
 * `account`: checked as far as possible without a Cloudflare account.
 *
 * @example
 * ```ts
 * await checkAccount(command); // "wrangler login exists in the pinned wrangler (--help)"
 * ```
 */
export async function checkAccount(command: DocCommand): Promise<string> {
  const ws = words(command.text);
  const wrangler = join(REPO_ROOT, "node_modules/.bin/wrangler");
  if (ws[0] === "npx" && ws[1] === "wrangler") {
    const sub = ws.slice(2).filter((w) => !w.startsWith("-"));
    const verbs = sub[0] === "r2" ? sub.slice(0, 3) : sub[0] === "secret" ? sub.slice(0, 2) : sub.slice(0, 1);
    await exits0(wrangler, [...verbs, "--help"]);
    if (sub[0] === "r2" && sub[1] === "bucket" && sub[2] === "create") {
      const toml = parseToml(readFileSync(join(REPO_ROOT, "wrangler.toml"), "utf8")) as {
        r2_buckets?: Array<{ bucket_name: string }>;
      };
      const names = (toml.r2_buckets ?? []).map((b) => b.bucket_name);
      if (!names.includes(sub[3] ?? ""))
        throw new Error(`bucket '${sub[3]}' is not wrangler.toml's (${names.join(", ")})`);
      return `wrangler ${verbs.join(" ")} exists (--help); '${sub[3]}' is wrangler.toml's bucket; not created (no account)`;
    }
    return `wrangler ${verbs.join(" ")} exists in the pinned wrangler (--help); not run (no account)`;
  }
  const isDeploy =
    (ws[0] === "npx" && ws[1] === "polar" && ws[2] === "deploy") ||
    (ws[0] === "npm" && ws[1] === "run" && ws[2] === "deploy");
  if (isDeploy) {
    dryRun ??= exits0(process.execPath, [join(REPO_ROOT, "bin/polar.mjs"), "deploy", "--dry-run"]).then(
      () => "polar deploy --dry-run bundled the Worker for real; not deployed (no account)",
    );
    return dryRun;
  }
  throw new Error("an `account` line must be `npx wrangler …`, `npx polar deploy` or `npm run deploy`");
}

/** Vitest projects' include globs, as roots CI's `npm test` runs. */
const PROJECT_ROOTS = [
  /^control-plane\/.*\.test\.ts$/,
  /^(protocol|proxy|gateway-agent|sim|tokenizer|cli|examples|scripts|clients|web)\/.*\.test\.ts$/, // the node project's include (vitest.config.ts)
  /^test\/.*\.test\.ts$/,
];

/**
 * What a covered command runs, and what its covering test must then contain: a script under
 * scripts/, examples/ or bench/ (its path without the extension; `npm run NAME` runs the one of
 * package.json's script NAME), a deployment file under deploy/ (its
 * path, also as the installed package's copy), or the gateway package by its npm name (`packGateway`, which builds and packs
 * packages/polar-gateway: the test installs that tarball, the registry's copy of which the
 * command names).
 */
const COVERED_ARTEFACTS: Array<{ word: RegExp; uses: (w: string) => string }> = [
  {
    word: /^(scripts|examples|bench)\/[\w./-]+\.(sh|ts|mjs|py)$/,
    uses: (w) => w.replace(/\.(sh|ts|mjs|py)$/, ""),
  },
  { word: /^deploy\/[\w./-]+$/, uses: (w) => w },
  // The copy the installed package ships (`$(npm root -g)/@polar-ts/gateway/deploy/FILE`), which
  // test/e2e/package-install.test.ts checks is the repository's deploy/gateway/FILE.
  {
    word: /@polar-ts\/gateway\/deploy\/[\w.-]+$/,
    uses: (w) => `deploy/gateway/${w.slice(w.lastIndexOf("/") + 1)}`,
  },
  { word: /^@polar-ts\/gateway(@[\w.-]+)?$/, uses: () => "packGateway" },
];

/**
 * The words of a command with, for `npm run NAME`, the words of package.json's script NAME after
 * them: `npm run demo` runs scripts/demo.ts, which its covering test must then use.
 */
function withNpmScript(ws: string[]): string[] {
  const run = ws.findIndex((w, i) => w === "npm" && ws[i + 1] === "run" && ws[i + 2] !== undefined);
  if (run < 0) return ws;
  const name = ws[run + 2]!;
  const scripts = (
    JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
      scripts?: Record<string, string>;
    }
  ).scripts;
  const script = scripts?.[name];
  if (script === undefined) throw new Error(`package.json has no script '${name}'`);
  return [...ws, ...words(script)];
}

/**
 * `covered FILE`: FILE is a test CI runs and it uses the script (or deployment file, or
 * package) the command runs.
 *
 * @example
 * ```ts
 * checkCovered(command); // "run by test/e2e/harnesses.test.ts (uses scripts/run-harnesses)"
 * ```
 */
export function checkCovered(command: DocCommand): string {
  const file = command.method.args[0]!;
  if (!PROJECT_ROOTS.some((r) => r.test(file))) throw new Error(`${file} is in no vitest project CI runs`);
  const text = readFileSync(join(REPO_ROOT, file), "utf8");
  if (!ciRuns("npm test")) throw new Error(".ci/run does not run npm test");
  const ws = withNpmScript(words(command.text));
  const found = COVERED_ARTEFACTS.flatMap(({ word, uses }) => {
    const w = ws.find((x) => word.test(x));
    return w ? [{ w, stem: uses(w) }] : [];
  })[0];
  if (!found)
    throw new Error(
      "`covered` needs a command that runs a script under scripts/, examples/ or bench/, a file under deploy/, or @polar-ts/gateway",
    );
  if (!text.includes(found.stem)) throw new Error(`${file} does not use ${found.w}`);
  return `not run here: ${file} (CI) runs ${found.stem}`;
}

/**
 * `syntax REASON`: bash parses it; nothing more (REASON says why it cannot run here).
 *
 * @example
 * ```ts
 * await checkSyntax(command);
 * ```
 */
export async function checkSyntax(command: DocCommand): Promise<string> {
  const r = await execa("bash", ["-n", "-c", command.text], { reject: false, all: true });
  if (r.exitCode !== 0) throw new Error(`bash -n: ${r.all}`);
  return `syntax only (bash -n): ${command.method.args.join(" ")}`;
}
