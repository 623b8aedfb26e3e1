/**
 * `npm run bench` (bench/run-all.ts) for real, at its quick size and on two of its benchmarks: it
 * runs each as its own process and writes one Markdown report and one JSON file with each
 * benchmark's table, goal, machine load and figures; a name it does not know is refused.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, describe, expect, it } from "vitest";
import { relativePaths } from "../../bench/run-all";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { MODEL_FAMILIES } from "../../tokenizer/families";
import { describeWith } from "../support/optional-tools";

const out = mkdtempSync(join(tmpdir(), "polar-bench-report-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** `bench/tokens.ts --json`: one entry per family. */
type TokenFigures = Array<{
  family: string;
  sessions: number;
  turns: number;
  rows: Array<{ name: string; n: number; convExact: number | null }>;
  endOfTurnId: number;
  calls: { sampled: number; parsed: number };
}>;

const runAll = (...args: string[]) =>
  execa(process.execPath, ["--import", "tsx", "bench/run-all.ts", ...args], {
    cwd: REPO_ROOT,
    reject: false,
  });

describe("npm run bench", () => {
  it("runs the benchmarks named and writes report.md and report.json with their tables and figures", async () => {
    const run = await runAll("--quick", "--only", "long-history,tokens", "--out", out);
    expect(run.exitCode, run.stderr).toBe(0);
    const md = readFileSync(join(out, "report.md"), "utf8");
    expect(md).toMatch(/^# Benchmark report/);
    expect(md).toContain("**Quick run**");
    expect(md).toMatch(/\| \[long-history\]\(#long-history\) \| ran \|/);
    expect(md).toMatch(/\| \[tokens\]\(#tokens\) \| ran \|/);
    // Each benchmark's own table, under its goal.
    expect(md).toContain("- Goal: ≤ 1 ms of CPU per turn at 32k tokens.");
    expect(md).toMatch(/\| history \(tokens\) \|/);
    expect(md).toMatch(/\| token bridge \(prepare \+ parse \+ commit\) \|/);
    const json = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as {
      quick: boolean;
      machine: { cores: number };
      runs: Array<{ name: string; exitCode: number; load: { before: number }; figures?: unknown }>;
    };
    expect(json.quick).toBe(true);
    expect(json.machine.cores).toBeGreaterThan(0);
    expect(json.runs.map((r) => r.name)).toEqual(["tokens", "long-history"]);
    // bench:tokens measures every model family: a section and a figures entry each, and in each
    // family every session without compaction is one token-exact chain in token mode.
    for (const family of MODEL_FAMILIES)
      expect(md).toMatch(new RegExp(`^### ${family}: 10 sessions, \\d+ turns`, "m"));
    const tokenFigures = json.runs[0]!.figures as TokenFigures;
    expect(tokenFigures.map((f) => f.family)).toEqual([...MODEL_FAMILIES]);
    for (const f of tokenFigures) {
      expect(f.turns, f.family).toBeGreaterThan(10);
      const whole = f.rows.find((r) => r.name === "no compaction")!;
      expect(whole.n, f.family).toBeGreaterThan(0);
      expect(whole.convExact, f.family).toBe(1);
      // Each family's own vocabulary and call format: every sampled call is read back by its parser.
      expect(f.calls.sampled, f.family).toBeGreaterThan(0);
      expect(f.calls.parsed, f.family).toBe(f.calls.sampled);
    }
    expect(tokenFigures.map((f) => f.endOfTurnId)).toEqual([151645, 1]);
    const figures = json.runs[1]!.figures as Array<{
      targetTokens: number;
      promptTokens: number;
      cpuMsP50: number;
    }>;
    expect(figures.map((f) => f.targetTokens)).toEqual([2048, 4096]);
    for (const f of figures) {
      expect(f.promptTokens).toBeGreaterThanOrEqual(f.targetTokens);
      expect(f.cpuMsP50).toBeGreaterThan(0);
    }
  });

  it("--merge runs one benchmark again and keeps the others' runs, each with its own date and commit", async () => {
    type Report = { runs: Array<{ name: string; seconds: number; commit: string; date: string }> };
    const before = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as Report;
    const run = await runAll("--quick", "--merge", "--only", "long-history", "--out", out);
    expect(run.exitCode, run.stderr).toBe(0);
    expect(run.stderr).toContain("kept 1 from the report before");
    const after = JSON.parse(readFileSync(join(out, "report.json"), "utf8")) as Report;
    expect(after.runs.map((r) => r.name)).toEqual(["tokens", "long-history"]);
    expect(after.runs[0]).toEqual(before.runs[0]);
    expect(after.runs[1]!.seconds).not.toBe(before.runs[1]!.seconds);
    for (const r of after.runs) expect(r.commit).toMatch(/^[0-9a-f]{12}$/);
    const md = readFileSync(join(out, "report.md"), "utf8");
    expect(md).toMatch(
      /\| \[tokens\]\(#tokens\) \| ran \| \d+ \| [\d.]+ → [\d.]+ \| \d{4}-\d\d-\d\d, [0-9a-f]{12} \|/,
    );
    // A full run does not merge into a quick report.
    const mixed = await runAll("--merge", "--only", "tokens", "--out", out);
    expect(mixed.exitCode).not.toBe(0);
    expect(mixed.stderr).toContain("is a quick report; this run is not");
  });

  it("names files in a failed benchmark's error output from the repository root, not by this machine's paths", () => {
    const trace = `Error: late\n    at measure (${REPO_ROOT}/bench/scale.ts:96:20)\n    at f (${REPO_ROOT}/node_modules/x/index.js:1:1)`;
    expect(relativePaths(trace)).toBe(
      "Error: late\n    at measure (./bench/scale.ts:96:20)\n    at f (./node_modules/x/index.js:1:1)",
    );
  });

  it("bench:tokens measures one family when --model-family names it, and refuses a family it does not know", async () => {
    const file = join(out, "tokens-one-family.json");
    const one = await execa(
      process.execPath,
      ["--import", "tsx", "bench/tokens.ts", "--model-family", "deepseek_v3", "--json", file],
      { cwd: REPO_ROOT, reject: false, env: { BENCH_SESSIONS: "2" } },
    );
    expect(one.exitCode, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/^\| deepseek_v3 \| real DeepSeek V3 tokenizer/m);
    expect(one.stdout).not.toContain("| qwen3 |");
    // DeepSeek V3 has no reasoning block: no `<think>` row.
    expect(one.stdout).not.toContain("| <think> blocks |");
    const figures = JSON.parse(readFileSync(file, "utf8")) as TokenFigures;
    expect(figures.map((f) => [f.family, f.sessions])).toEqual([["deepseek_v3", 2]]);
    const unknown = await execa(
      process.execPath,
      ["--import", "tsx", "bench/tokens.ts", "--model-family", "llama"],
      { cwd: REPO_ROOT, reject: false },
    );
    expect(unknown.exitCode).toBe(2);
    expect(unknown.stderr).toContain(
      '--model-family: unknown family "llama" (known: qwen3, deepseek_v3, or all)',
    );
  });

  it("refuses a benchmark name it does not know, naming the ones it has", async () => {
    const run = await runAll("--only", "tokens,nope", "--out", out);
    expect(run.exitCode).not.toBe(0);
    expect(run.stderr).toMatch(/--only: no benchmark named nope \(there are: proxy, tokens, long-history/);
  });
});

describeWith(["bubblewrap", "jq"], "npm run bench: the gateway benchmark", { timeout: 300_000 }, () => {
  it("runs sessions in token mode in bubblewrap sandboxes, each one trace of its three model calls", async () => {
    const run = await runAll("--quick", "--only", "gateway", "--out", out);
    expect(run.exitCode, run.stderr).toBe(0);
    const md = readFileSync(join(out, "report.md"), "utf8");
    expect(md).toMatch(/\| \[gateway\]\(#gateway\) \| ran \|/);
    expect(md).toContain("Token mode in bubblewrap sandboxes");
    // sessions, wall, completed, one trace, calls/session: all four completed, one trace, 3 calls.
    expect(md).toMatch(/^\s+4\s+[\d.]+ s\s+4\s+4\s+3\.00\s/m);
  });
});
