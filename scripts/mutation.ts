/**
 * Mutation testing, one group of modules at a time: `npm run test:mutation -- GROUP…`.
 *
 * Runs StrykerJS (`stryker.config.mjs`, vitest runner, `vitest.mutation.config.ts`) on a group's
 * modules with the group's tests only, writes `reports/mutation/GROUP/` (`mutation.json`,
 * `mutation.html`, `table.md`, `survivors.txt`, `incremental.json`, and `mutants.jsonl`, each mutant
 * as soon as it is tested, for a run stopped early) and prints one row per module:
 * mutants, killed, survived, no coverage, timeout, score. It is a weekly-sized job, not part of
 * `npm test` (docs/testing.md, "Mutation testing", has the last figures).
 *
 *     npm run test:mutation -- --list                    # the groups
 *     npm run test:mutation -- proxy-builders            # one group
 *     npm run test:mutation -- proxy-builders --incremental   # only mutants whose code or tests changed
 *     npm run test:mutation -- tokenizer-bridge --mutate tokenizer/bridge/verdicts.ts  # part of a group
 *     npm run test:mutation -- --mutate 'proxy/builders/**\/*.ts' --test-files 'proxy/builders/*.test.ts'
 *     npm run test:mutation -- --table reports/mutation/proxy-builders/mutation.json
 *     npm run test:mutation -- --table reports/mutation/proxy-builders/mutants.jsonl   # a stopped run
 *
 * StrykerJS 10 declares Node.js >= 22 and its command line refuses to start on 20; everything it
 * runs works on 20.20 (Babel 8 included), so this script calls its API (`Stryker`) directly, past
 * the command line's version check.
 *
 * @module
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

/** A group: modules whose mutants are run against the tests that exercise them. */
export interface MutationGroup {
  name: string;
  /** What its bugs would do. */
  why: string;
  mutate: string[];
  testFiles: string[];
  /** The vitest project of its tests. */
  project: "node" | "workers";
}

const NOT_TESTS = (dir: string, files = "*.ts") => [`${dir}/${files}`, `!${dir}/**/*.test.ts`];

/** The groups, smallest first. */
export const GROUPS: MutationGroup[] = [
  {
    name: "proxy-builders",
    why: "trajectory builders: a wrong merge or split corrupts the token trajectories trained on",
    mutate: NOT_TESTS("proxy/builders"),
    testFiles: [
      "proxy/builders/*.test.ts",
      "proxy/engines/sglang-token/turns.test.ts",
      "proxy/engines/sglang-token/bridge.test.ts",
    ],
    project: "node",
  },
  {
    name: "tokenizer-bridge",
    why: "token bridge: a wrong verdict or normalisation puts tokens the model never produced into training data",
    mutate: NOT_TESTS("tokenizer/bridge"),
    testFiles: [
      "tokenizer/bridge/*.test.ts",
      "proxy/builders/*.test.ts",
      "proxy/engines/sglang-token/bridge.test.ts",
      "proxy/engines/sglang-token/bridge-reasoning.test.ts",
      "proxy/engines/sglang-token/bridge-images.test.ts",
      "proxy/engines/sglang-token/turns.test.ts",
    ],
    project: "node",
  },
  {
    name: "result-delivery",
    why: "result delivery and the journal: a finished session's result lost or sent twice",
    mutate: ["gateway-agent/result-delivery.ts", "gateway-agent/journal*.ts", "!**/*.test.ts"],
    testFiles: ["gateway-agent/result-delivery.test.ts", "gateway-agent/journal.test.ts"],
    project: "node",
  },
  {
    name: "evaluator-protection",
    why: "graders' protection, guard and report channel: a tampered grade accepted as a reward",
    mutate: [
      "gateway-agent/evaluator/protected.ts",
      "gateway-agent/evaluator/guard.ts",
      "gateway-agent/evaluator/runner-guard.ts",
      "gateway-agent/evaluator/report-channel.ts",
    ],
    testFiles: [
      "gateway-agent/evaluator/protection.test.ts",
      "gateway-agent/evaluator/report-channel.test.ts",
      "gateway-agent/evaluator/runner-guard.test.ts",
      "gateway-agent/evaluator/evaluators.test.ts",
    ],
    project: "node",
  },
  {
    name: "control-plane-batch",
    why: "batch ledger and its stores: a result counted twice, lost, or a batch that never completes",
    mutate: [...NOT_TESTS("control-plane/batch"), "!control-plane/batch/drizzle.config.ts"],
    testFiles: ["control-plane/batch/*.test.ts"],
    project: "workers",
  },
  {
    name: "control-plane-queue",
    why: "dispatch, leases, loans and liveness: a rollout run twice or never",
    mutate: [
      "control-plane/queue/{dispatch,lease-store,loan-store,lost-leases,liveness,pending-store,stealing}.ts",
    ],
    testFiles: ["control-plane/queue/*.test.ts"],
    project: "workers",
  },
];

/** The parts of a Stryker mutant result this script reads (mutation-testing-report-schema). */
export interface MutantResult {
  fileName: string;
  mutatorName: string;
  replacement?: string;
  status: string;
  location: { start: { line: number; column: number } };
}

export interface ModuleRow {
  module: string;
  mutants: number;
  killed: number;
  survived: number;
  noCoverage: number;
  timeout: number;
  /** Errors (compile, runtime) and ignored mutants: not in the score. */
  other: number;
  /** Detected over valid, as Stryker counts it: (killed + timeout) / (killed + timeout + survived + no coverage). */
  score: number | null;
}

/** One row per module and a total, from a run's mutant results. */
export function moduleTable(mutants: MutantResult[], root = process.cwd()): ModuleRow[] {
  const rows = new Map<string, ModuleRow>();
  const row = (module: string): ModuleRow => {
    let r = rows.get(module);
    if (!r) {
      r = { module, mutants: 0, killed: 0, survived: 0, noCoverage: 0, timeout: 0, other: 0, score: null };
      rows.set(module, r);
    }
    return r;
  };
  const count = (r: ModuleRow, status: string) => {
    r.mutants++;
    if (status === "Killed") r.killed++;
    else if (status === "Survived") r.survived++;
    else if (status === "NoCoverage") r.noCoverage++;
    else if (status === "Timeout") r.timeout++;
    else r.other++;
  };
  const total: ModuleRow = {
    module: "total",
    mutants: 0,
    killed: 0,
    survived: 0,
    noCoverage: 0,
    timeout: 0,
    other: 0,
    score: null,
  };
  for (const m of mutants) {
    count(row(path.relative(root, path.resolve(root, m.fileName))), m.status);
    count(total, m.status);
  }
  const out = [...rows.values()].sort((a, b) => a.module.localeCompare(b.module));
  for (const r of [...out, total]) {
    const valid = r.killed + r.timeout + r.survived + r.noCoverage;
    r.score = valid === 0 ? null : (100 * (r.killed + r.timeout)) / valid;
  }
  return [...out, total];
}

/** The table as markdown (docs/testing.md uses the same columns). */
export function formatTable(rows: ModuleRow[]): string {
  const head = "| module | mutants | killed | survived | no coverage | timeout | errors/ignored | score |";
  const lines = rows.map(
    (r) =>
      `| ${r.module} | ${r.mutants} | ${r.killed} | ${r.survived} | ${r.noCoverage} | ${r.timeout} | ${r.other} | ${r.score === null ? "n/a" : `${r.score.toFixed(1)}%`} |`,
  );
  return [head, "|---|---:|---:|---:|---:|---:|---:|---:|", ...lines].join("\n");
}

/** The mutants no test detected, one a line: `file:line:column mutator → replacement [status]`. */
export function survivors(mutants: MutantResult[], root = process.cwd()): string[] {
  return mutants
    .filter((m) => m.status === "Survived" || m.status === "NoCoverage")
    .map((m) => ({ ...m, file: path.relative(root, path.resolve(root, m.fileName)) }))
    .sort((a, b) => a.file.localeCompare(b.file) || a.location.start.line - b.location.start.line)
    .map(
      (m) =>
        `${m.file}:${m.location.start.line}:${m.location.start.column} ${m.mutatorName} → ${JSON.stringify(m.replacement ?? "")} [${m.status}]`,
    );
}

/** Mutant results of a Stryker JSON report (`files.FILE.mutants[]`). */
export function reportMutants(report: {
  files: Record<string, { mutants: Array<Omit<MutantResult, "fileName">> }>;
}): MutantResult[] {
  return Object.entries(report.files).flatMap(([fileName, f]) => f.mutants.map((m) => ({ ...m, fileName })));
}

export interface MutationArgs {
  groups: MutationGroup[];
  incremental: boolean;
  force: boolean;
  concurrency: number | undefined;
  coverageAnalysis: "off" | "all" | "perTest" | undefined;
  list: boolean;
  table: string | undefined;
}

/** Reads the command line; `--mutate`/`--test-files` narrow a named group, or make one of their own. */
export function parseMutationArgs(argv: string[]): MutationArgs {
  const args: MutationArgs = {
    groups: [],
    incremental: false,
    force: false,
    concurrency: undefined,
    coverageAnalysis: undefined,
    list: false,
    table: undefined,
  };
  const mutate: string[] = [];
  const testFiles: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === "--mutate" || a === "-m") mutate.push(...splitGlobs(value()));
    else if (a === "--test-files") testFiles.push(...splitGlobs(value()));
    else if (a === "--incremental") args.incremental = true;
    else if (a === "--force") args.force = true;
    else if (a === "--concurrency") args.concurrency = Number(value());
    else if (a === "--coverage-analysis") {
      const v = value();
      if (v !== "off" && v !== "all" && v !== "perTest") throw new Error(`unknown coverage analysis '${v}'`);
      args.coverageAnalysis = v;
    } else if (a === "--list") args.list = true;
    else if (a === "--table") args.table = value();
    else if (a.startsWith("-")) throw new Error(`unknown option ${a}`);
    else {
      const g = GROUPS.find((x) => x.name === a);
      if (!g) throw new Error(`unknown group '${a}' (known: ${GROUPS.map((x) => x.name).join(", ")})`);
      args.groups.push(g);
    }
  }
  if (mutate.length > 0 || testFiles.length > 0) {
    if (args.groups.length > 1) throw new Error("--mutate and --test-files narrow one group at a time");
    const base = args.groups[0];
    if (!base && mutate.length === 0) throw new Error("--test-files needs a group or --mutate");
    args.groups = [
      {
        name: base?.name ?? "custom",
        why: base?.why ?? "modules given on the command line",
        mutate: mutate.length > 0 ? mutate : base!.mutate,
        testFiles:
          testFiles.length > 0 ? testFiles : (base?.testFiles ?? guessTestFiles(mutate.filter(isPositive))),
        project: base?.project ?? (mutate.some((m) => m.startsWith("control-plane/")) ? "workers" : "node"),
      },
    ];
  }
  return args;
}

const isPositive = (glob: string) => !glob.startsWith("!");

/** `a.ts,b/{c,d}.ts` → `a.ts`, `b/{c,d}.ts`: commas separate globs, except inside braces. */
export function splitGlobs(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const c of text) {
    if (c === "{") depth++;
    else if (c === "}") depth--;
    if (c === "," && depth === 0) {
      out.push(cur);
      cur = "";
    } else cur += c;
  }
  return [...out, cur].filter(Boolean);
}

/** `proxy/builders/**\/*.ts` → the test files beside it: `proxy/builders/**\/*.test.ts`. */
function guessTestFiles(mutate: string[]): string[] {
  const dir = (glob: string) =>
    glob.split("/").filter((part, i, all) => i < all.length - 1 && !/[*{]/.test(part));
  return [...new Set(mutate.map((m) => `${dir(m).join("/")}/**/*.test.ts`))];
}

/** Stryker's `Stryker` class, imported by file: the package's entry point runs the CLI's Node version check. */
async function loadStryker(): Promise<
  new (
    options: Record<string, unknown>,
  ) => { runMutationTest(): Promise<MutantResult[]> }
> {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve("@stryker-mutator/core/package.json");
  const mod = await import(pathToFileURL(path.join(path.dirname(pkg), "dist/src/stryker.js")).href);
  return mod.Stryker;
}

async function runGroup(group: MutationGroup, args: MutationArgs): Promise<ModuleRow[]> {
  const dir = path.join("reports", "mutation", group.name);
  mkdirSync(dir, { recursive: true });
  const Stryker = await loadStryker();
  const started = Date.now();
  const options: Record<string, unknown> = {
    configFile: "stryker.config.mjs",
    mutate: group.mutate,
    testFiles: group.testFiles,
    jsonReporter: { fileName: path.join(dir, "mutation.json") },
    htmlReporter: { fileName: path.join(dir, "mutation.html") },
    incremental: args.incremental,
    incrementalFile: path.join(dir, "incremental.json"),
    force: args.force,
  };
  if (args.concurrency !== undefined) options.concurrency = args.concurrency;
  // Coverage per test is collected in the test runner's globals, which workerd's isolates do
  // not share with it: the workers project runs every test of the group for every mutant.
  const coverage = args.coverageAnalysis ?? (group.project === "workers" ? "off" : undefined);
  if (coverage) options.coverageAnalysis = coverage;
  if (coverage && coverage !== "perTest") options.ignoreStatic = false;
  // Each mutant as it is tested (scripts/mutation-log-reporter.mjs): what a stopped run found.
  const log = path.resolve(dir, "mutants.jsonl");
  writeFileSync(log, "");
  process.env.POLAR_MUTANT_LOG = log;
  const results = await new Stryker(options).runMutationTest();
  const rows = moduleTable(results);
  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  const table = formatTable(rows);
  writeFileSync(path.join(dir, "table.md"), `${group.name} (${minutes} min)\n\n${table}\n`);
  writeFileSync(path.join(dir, "survivors.txt"), `${survivors(results).join("\n")}\n`);
  console.log(`\n== ${group.name}: ${group.why} (${minutes} min)\n${table}`);
  console.log(`survivors: ${path.join(dir, "survivors.txt")}`);
  return rows;
}

async function main(): Promise<number> {
  const args = parseMutationArgs(process.argv.slice(2));
  if (args.list) {
    for (const g of GROUPS)
      console.log(
        `${g.name} (${g.project}): ${g.why}\n  mutate: ${g.mutate.join(" ")}\n  tests: ${g.testFiles.join(" ")}`,
      );
    return 0;
  }
  if (args.table) {
    const text = readFileSync(args.table, "utf8");
    const mutants = args.table.endsWith(".jsonl")
      ? text
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l) as MutantResult)
      : reportMutants(JSON.parse(text));
    console.log(formatTable(moduleTable(mutants)));
    console.log(survivors(mutants).join("\n"));
    return 0;
  }
  if (args.groups.length === 0) {
    console.error(
      `name a group (${GROUPS.map((g) => g.name).join(", ")}), or --mutate GLOB; --list shows them`,
    );
    return 2;
  }
  for (const group of args.groups) await runGroup(group, args);
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) process.exitCode = await main();
