import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { loadTaskFile } from "../../cli/task-file";
import { makeEvalScript, parseInstance } from "../../gateway-agent/evaluator/swebench";
import { BatchRequest } from "../../protocol";
import {
  BUILDERS,
  buildTask,
  DEFAULT_OPTIONS,
  GenerateError,
  generateBatch,
  imageFor,
  parseInstances,
  swebenchImageId,
  TESTBED,
  WORKSPACE,
} from "./generate-tasks";

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
const FIXTURES = path.join(here, "instances.jsonl");
const GENERATOR = path.join(here, "generate-tasks.ts");
const fixtureText = readFileSync(FIXTURES, "utf8");
const fixtureLines = fixtureText.trim().split("\n");

/** Runs the generator as a real process (the way a user does, through tsx). */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, ["--import", "tsx", GENERATOR, ...args], { cwd: here });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), "polar-swebench-gen-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe("SWE-bench image names", () => {
  it("lower-case the id and replace the double underscore with _1776_, as SWE-bench's images do", () => {
    expect(swebenchImageId("django__django-11099")).toBe("django_1776_django-11099");
    expect(swebenchImageId("Project__Repo__X-1")).toBe("project_1776_repo_1776_x-1");
    expect(imageFor("sympy__sympy-20590")).toBe("swebench/sweb.eval.x86_64.sympy_1776_sympy-20590:latest");
    expect(imageFor("psf__requests-2317", "reg.local/{instance_id}:{id}")).toBe(
      "reg.local/psf__requests-2317:psf_1776_requests-2317",
    );
  });
});

describe("task generation from the fixture rows", () => {
  const rows = parseInstances(fixtureText, "instances.jsonl");

  it("reads the three fixture rows with their line numbers and decoded test lists", () => {
    expect(rows.map((r) => [r.line, r.row.instance_id, r.row.repo])).toEqual([
      [1, "django__django-99901", "django/django"],
      [2, "sympy__sympy-99902", "sympy/sympy"],
      [3, "psf__requests-99903", "psf/requests"],
    ]);
    expect(rows[1]?.row.FAIL_TO_PASS).toEqual(["test_degree_zero_poly_gen"]);
    // The dataset stores the lists JSON-encoded; the raw row keeps that form.
    expect(typeof rows[1]?.raw.FAIL_TO_PASS).toBe("string");
  });

  it("every builder and harness gives tasks that BatchRequest accepts, laid out as upstream's example", () => {
    for (const builder of BUILDERS) {
      for (const harness of ["claude_code", "codex", "mini_swe_agent"] as const) {
        const batch = generateBatch(rows, { ...DEFAULT_OPTIONS, harness, builder, samples: 4 }, "f");
        const parsed = BatchRequest.parse(batch);
        expect(parsed.tasks).toHaveLength(3);
        for (const task of parsed.tasks) {
          expect(task.num_samples).toBe(4);
          expect(task.timeout_seconds).toBe(3600);
          expect(task.agent.harness).toBe(harness);
          expect(task.builder?.strategy).toBe(builder);
          expect(task.runtime?.backend).toBe("docker");
          expect(task.runtime?.workdir).toBe(WORKSPACE);
          expect(task.runtime?.prepare[0]).toMatchObject({ type: "exec", cwd: "/" });
          const prep = task.runtime?.prepare[0];
          expect(prep?.type === "exec" && prep.command).toContain(`cp -a ${TESTBED}/. ${WORKSPACE}/`);
          expect(task.evaluator).toMatchObject({
            strategy: "swebench_harness",
            refresh_runtime: true,
            config: { repo_dir: TESTBED },
          });
        }
      }
    }
  });

  it("images follow the naming rule, metadata names the instance, the instruction is the issue", () => {
    const batch = BatchRequest.parse(generateBatch(rows, { ...DEFAULT_OPTIONS, harness: "codex" }, "f"));
    expect(batch.tasks.map((t) => t.runtime?.image)).toEqual([
      "swebench/sweb.eval.x86_64.django_1776_django-99901:latest",
      "swebench/sweb.eval.x86_64.sympy_1776_sympy-99902:latest",
      "swebench/sweb.eval.x86_64.psf_1776_requests-99903:latest",
    ]);
    expect(batch.tasks.map((t) => t.task_id)).toEqual([
      "django__django-99901",
      "sympy__sympy-99902",
      "psf__requests-99903",
    ]);
    expect(batch.tasks[0]?.metadata).toEqual({
      dataset: "SWE-bench_Verified",
      instance_id: "django__django-99901",
      repo: "django/django",
      version: "5.1",
    });
    const statement = rows[0]?.row.problem_statement.trim() as string;
    expect(batch.tasks[0]?.instruction).toBe(statement);
    const hinted = buildTask(rows[0] as (typeof rows)[0], {
      ...DEFAULT_OPTIONS,
      harness: "codex",
      withHints: true,
    });
    expect(hinted.instruction).toBe(`${statement}\n\nHints:\n${rows[0]?.row.hints_text}`);
    // sympy's row has empty hints: nothing is appended.
    expect(
      buildTask(rows[1] as (typeof rows)[0], { ...DEFAULT_OPTIONS, harness: "codex", withHints: true })
        .instruction,
    ).toBe(rows[1]?.row.problem_statement.trim());
  });

  it("the evaluator config carries the raw row, which the gateway's swebench_harness accepts", () => {
    const batch = BatchRequest.parse(
      generateBatch(rows, { ...DEFAULT_OPTIONS, harness: "claude_code" }, "f"),
    );
    batch.tasks.forEach((task, i) => {
      const instance = task.evaluator?.config.instance;
      expect(instance).toEqual(JSON.parse(fixtureLines[i] as string));
      const parsed = parseInstance(instance);
      expect(parsed.FAIL_TO_PASS).toEqual(JSON.parse((instance as { FAIL_TO_PASS: string }).FAIL_TO_PASS));
      expect(task.evaluator?.config.patch_command).toBe(
        `cd ${WORKSPACE} && git add -A && git diff --cached --binary`,
      );
      expect(task.evaluator?.config.exclude_patterns).toEqual([".claude/**"]);
    });
    const django = makeEvalScript(parseInstance(batch.tasks[0]?.evaluator?.config.instance), TESTBED);
    expect(django).toContain(
      "git checkout '4b1f3c9e7d2a8f6051c3e9ab7d40f2c68e1a5b93' -- 'tests/humanize_tests/tests.py'",
    );
    expect(django).toContain(
      "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 'humanize_tests.tests'",
    );
  });
});

describe("bad rows and flags are reported with the row and field", () => {
  const good = JSON.parse(fixtureLines[0] as string) as Record<string, unknown>;
  const line = (o: Record<string, unknown>) => JSON.stringify(o);

  it("missing instance_id, non-JSON FAIL_TO_PASS, non-list JSON, bad line, duplicate id: all listed", () => {
    const { instance_id: _drop, ...noId } = good;
    const text = [
      line(good),
      line(noId),
      "",
      line({ ...good, instance_id: "x__y-2", FAIL_TO_PASS: "[not json" }),
      line({ ...good, instance_id: "x__y-3", PASS_TO_PASS: '{"a": 1}' }),
      "{truncated",
      line(good),
    ].join("\n");
    let message = "";
    try {
      parseInstances(text, "in.jsonl");
    } catch (err) {
      expect(err).toBeInstanceOf(GenerateError);
      message = (err as Error).message;
    }
    expect(message.split("\n")).toEqual([
      "in.jsonl:2: instance_id: required string",
      "in.jsonl:4: FAIL_TO_PASS: not a JSON-encoded list of strings",
      "in.jsonl:5: PASS_TO_PASS: must encode a list of strings",
      expect.stringMatching(/^in\.jsonl:6: not valid JSON/),
      "in.jsonl:7: instance_id: 'django__django-99901' already on line 1",
    ]);
    expect(() => parseInstances("\n\n", "empty.jsonl")).toThrow("empty.jsonl: no instances");
    expect(() => parseInstances(line({ ...good, FAIL_TO_PASS: "[]" }), "f")).toThrow(
      "f:1: FAIL_TO_PASS: must list at least one test",
    );
  });

  it("a row that makes an invalid task is named by line and instance id", () => {
    const rows = parseInstances(
      [line(good), line({ ...good, instance_id: "ok__fine-1" })].join("\n"),
      "in.jsonl",
    );
    expect(() =>
      generateBatch(rows, { ...DEFAULT_OPTIONS, harness: "codex", taskPrefix: "-bad-" }, "in.jsonl"),
    ).toThrow(/^in\.jsonl:1 \(django__django-99901\): task_id: /);
  });

  // Eight real tsx processes: allow for a loaded machine.
  it("the CLI writes a batch file that `polar submit` loads, and exits 2 naming the flag or row", {
    timeout: 60_000,
  }, async () => {
    const out = path.join(scratch, "tasks.yaml");
    const ok = await cli(["--instances", FIXTURES, "--harness", "qwen_code", "--samples", "2", "--out", out]);
    expect(ok).toMatchObject({ code: 0, stderr: `${out}: 3 tasks\n` });
    const loaded = BatchRequest.parse(loadTaskFile(out));
    expect(loaded.tasks.map((t) => [t.task_id, t.num_samples, t.agent.harness])).toEqual([
      ["django__django-99901", 2, "qwen_code"],
      ["sympy__sympy-99902", 2, "qwen_code"],
      ["psf__requests-99903", 2, "qwen_code"],
    ]);
    const one = await cli([
      "--instances",
      FIXTURES,
      "--harness",
      "codex",
      "--instance-id",
      "psf__requests-99903",
      "--builder",
      "conversation",
      "--image-template",
      "local/{id}",
      "--timeout",
      "900",
    ]);
    const doc = parseYaml(one.stdout) as { tasks: Array<Record<string, unknown>> };
    expect(doc.tasks).toHaveLength(1);
    expect(doc.tasks[0]).toMatchObject({
      task_id: "psf__requests-99903",
      timeout_seconds: 900,
      builder: { strategy: "conversation" },
      runtime: { image: "local/psf_1776_requests-99903" },
    });

    const bad = path.join(scratch, "bad.jsonl");
    await writeFile(
      bad,
      `${fixtureLines[0]}\n${line({ ...good, instance_id: "a__b-1", FAIL_TO_PASS: "nope" })}\n`,
    );
    expect(await cli(["--instances", bad, "--harness", "codex"])).toMatchObject({
      code: 2,
      stderr: `${bad}:2: FAIL_TO_PASS: not a JSON-encoded list of strings\n`,
    });
    expect(await cli(["--instances", FIXTURES, "--harness", "nope"])).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^--harness: 'nope' is not a preset/),
    });
    expect(await cli(["--instances", FIXTURES, "--harness", "codex", "--builder", "x"])).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^--builder: 'x'/),
    });
    expect(
      await cli(["--instances", FIXTURES, "--harness", "codex", "--image-template", "fixed:1"]),
    ).toMatchObject({
      code: 2,
      stderr: "--image-template: must contain {id} or {instance_id}\n",
    });
    expect(
      await cli(["--instances", FIXTURES, "--harness", "codex", "--instance-id", "zz__zz-1"]),
    ).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--instance-id: not in"),
    });
    expect(await cli(["--harness", "codex"])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining("--instances"),
    });
  });
});
