import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RuntimeSpec, SessionAssignment, type Trajectory } from "../../protocol";
import { describeWith } from "../../test/support/optional-tools";
import { LocalRuntime } from "../runtime/local";
import { DEFAULT_RUNTIME_SETTINGS, type Runtime } from "../runtime/types";
import { harbor, harborReward } from "./harbor";
import { mergeEvalResult } from "./merge";
import { filterPatch, isExcluded, parseTestStatusLines } from "./patch";
import { RUNNER_HOOK_REASON } from "./protected";
import {
  gradeLog,
  makeEvalScript,
  parseDjangoLog,
  parseInstance,
  swebenchHarness,
  touchedFiles,
} from "./swebench";
import { testOnOutput } from "./test-on-output";
import type { EvalContext } from "./types";

const DIFF = `diff --git a/src/calc.py b/src/calc.py
index 1..2 100644
--- a/src/calc.py
+++ b/src/calc.py
@@ -1 +1 @@
-x = 1
+x = 2
diff --git a/src/__pycache__/calc.cpython-311.pyc b/src/__pycache__/calc.cpython-311.pyc
Binary files differ
diff --git a/notes/run.log b/notes/run.log
new file mode 100644
--- /dev/null
+++ b/notes/run.log
@@ -0,0 +1 @@
+noise
`;

describe("patch helpers", () => {
  it("excludes default and configured patterns by whole path or path component", () => {
    expect(isExcluded("src/__pycache__/m.pyc", ["__pycache__"])).toBe(true);
    expect(isExcluded("a/b/c.pyc", ["*.pyc"])).toBe(true);
    expect(isExcluded("docs/**/x", ["docs/**"])).toBe(true);
    expect(isExcluded("src/calc.py", ["*.pyc", "__pycache__"])).toBe(false);
    const { patch, excluded } = filterPatch(DIFF, ["__pycache__", "*.pyc", "*.log"]);
    expect(excluded).toEqual(["src/__pycache__/calc.cpython-311.pyc", "notes/run.log"]);
    expect(patch).toContain("+x = 2");
    expect(patch).not.toContain("noise");
    expect(filterPatch("", []).patch).toBe("");
  });

  it("parses PASSED/FAILED/ERROR/SKIPPED lines with ANSI colours, normalising ids; later lines win", () => {
    const out = [
      "collected 4 items",
      "\u001b[32mPASSED\u001b[0m tests/test_calc.py::TestCalc::test_add",
      "FAILED tests/test_calc.py::test_div - ZeroDivisionError: division by zero",
      "ERROR tests/test_calc.py::test_io",
      "SKIPPED tests/test_calc.py::test_slow[param-1]",
      "FAILED tests/test_calc.py::TestCalc::test_add",
      "random PASSED text",
    ].join("\n");
    expect(parseTestStatusLines(out)).toEqual({
      "TestCalc.test_add": "FAILED",
      test_div: "FAILED",
      test_io: "ERROR",
      "test_slow[param-1]": "SKIPPED",
    });
  });
});

describe("reward merge and harbor reward files", () => {
  const traj = (n: number): Trajectory => ({
    status: "COMPLETED",
    traces: Array.from({ length: n }, () => ({
      prompt_ids: [1],
      response_ids: [2],
      loss_mask: [1],
      response_logprobs: null,
      prompt_messages: [],
      response_messages: [],
      tools: null,
      finish_reason: "stop",
      reward: null,
      metadata: {},
    })),
    metadata: {},
    error: null,
  });
  it("broadcasts the outcome reward, or takes per-trace rewards that match the count", () => {
    const a = mergeEvalResult(traj(2), "s", { outcome_reward: 1, metadata: { k: 1 } });
    expect(a.ok && a.trajectory.traces.map((t) => t.reward)).toEqual([1, 1]);
    expect(a.ok && a.trajectory.metadata.evaluation).toEqual({
      strategy: "s",
      outcome_reward: 1,
      trace_rewards: null,
      verdict: "clean",
      reward_discarded: false,
      reward_discard_reason: null,
      k: 1,
    });
    const b = mergeEvalResult(traj(2), "s", { outcome_reward: 0.5, trace_rewards: [0, 1], metadata: {} });
    expect(b.ok && b.trajectory.traces.map((t) => t.reward)).toEqual([0, 1]);
    expect(mergeEvalResult(traj(2), "s", { outcome_reward: 1, trace_rewards: [1], metadata: {} }).ok).toBe(
      false,
    );
  });
  it("refuses NaN, infinite and non-number rewards with the verdict invalid_reward (JSON would turn NaN into null)", () => {
    const cases: Array<[unknown, unknown, RegExp]> = [
      [Number.NaN, undefined, /outcome_reward is NaN/],
      [Number.POSITIVE_INFINITY, undefined, /outcome_reward is Infinity/],
      [true, undefined, /outcome_reward is a boolean/],
      ["1", undefined, /outcome_reward is a string/],
      [1, [1, Number.NEGATIVE_INFINITY], /trace_rewards\[1\] is -Infinity/],
    ];
    for (const [outcome, traces, why] of cases) {
      const r = mergeEvalResult(traj(2), "s", {
        outcome_reward: outcome as number,
        ...(traces ? { trace_rewards: traces as number[] } : {}),
        metadata: {},
      });
      expect(r.ok).toBe(false);
      if (r.ok) continue;
      expect(r.kind).toBe("agent");
      expect(r.error).toMatch(why);
      expect(r.trajectory?.traces.map((t) => t.reward)).toEqual([null, null]);
      expect(r.trajectory?.metadata.evaluation).toMatchObject({
        outcome_reward: null,
        verdict: "invalid_reward",
        reward_discarded: true,
        reward_discard_reason: expect.stringMatching(why),
      });
    }
  });
  it("harbor: reward.txt (clamped) wins, else reward.json scalar or mean, else 0", () => {
    expect(harborReward("0.25\n", '{"a":1}')).toBe(0.25);
    expect(harborReward("7", null)).toBe(1);
    expect(harborReward(null, '{"a": 1, "b": 0, "c": "x"}')).toBe(0.5);
    expect(harborReward(null, "0.75")).toBe(0.75);
    expect(harborReward("garbage", "also garbage")).toBe(0);
    expect(harborReward(null, null)).toBe(0);
  });
});

/** A SWE-bench style fixture instance over a tiny Python repository. */
const INSTANCE = {
  instance_id: "Polar__calc-1",
  repo: "polar/calc",
  version: "0.1",
  FAIL_TO_PASS: JSON.stringify(["tests/test_calc.py::test_add"]),
  PASS_TO_PASS: ["tests/test_calc.py::test_sub"],
  test_patch: `diff --git a/tests/test_calc.py b/tests/test_calc.py
--- a/tests/test_calc.py
+++ b/tests/test_calc.py
@@ -1,4 +1,7 @@
 from calc import add, sub
 
 def test_sub():
     assert sub(5, 3) == 2
+
+def test_add():
+    assert add(2, 3) == 5
`,
};

describe("swebench_harness grading (fixture instance)", () => {
  it("builds the eval script: reset test files, apply test_patch, run the repo's command between markers", () => {
    const inst = parseInstance({ ...INSTANCE, base_commit: "abc123" });
    expect(inst.instance_id).toBe("polar__calc-1");
    expect(touchedFiles(inst.test_patch)).toEqual(["tests/test_calc.py"]);
    const script = makeEvalScript(inst, "/testbed");
    expect(script).toContain("git checkout 'abc123' -- 'tests/test_calc.py'");
    expect(script).toContain("pytest --no-header -rA --tb=no -p no:cacheprovider 'tests/test_calc.py'");
    expect(script.indexOf(">>>>> Start Test Output")).toBeLessThan(script.indexOf("pytest"));
    const django = makeEvalScript(
      {
        ...inst,
        repo: "django/django",
        test_patch: "diff --git a/tests/queries/tests.py b/tests/queries/tests.py\n",
      },
      "/testbed",
    );
    expect(django).toContain(
      "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 'queries.tests'",
    );
    expect(() => parseInstance({ ...INSTANCE, base_commit: 3 })).toThrow(/instance\.base_commit/);
  });

  it("grades a log: resolved iff every FAIL_TO_PASS and PASS_TO_PASS passes", () => {
    const inst = parseInstance({ ...INSTANCE, base_commit: "abc" });
    const log = (add: string, sub: string) =>
      `noise\n>>>>> Start Test Output\n${add} tests/test_calc.py::test_add\n${sub} tests/test_calc.py::test_sub\n>>>>> End Test Output\n`;
    expect(gradeLog(inst, log("PASSED", "PASSED")).resolved).toBe(true);
    expect(gradeLog(inst, log("FAILED", "PASSED")).resolved).toBe(false);
    expect(gradeLog(inst, log("PASSED", "FAILED")).tests_status.PASS_TO_PASS.failure).toEqual([
      "tests/test_calc.py::test_sub",
    ]);
    expect(gradeLog(inst, "no markers at all").patch_successfully_applied).toBe(false);
    expect(parseDjangoLog("test_a (queries.tests.T) ... ok\ntest_b (queries.tests.T) ... FAIL\n")).toEqual({
      "test_a (queries.tests.T)": "PASSED",
      "test_b (queries.tests.T)": "FAILED",
    });
  });

  it("reads Django statuses printed after a test's docstring line", () => {
    const log = [
      "test_plain (admin.tests.A) ... ok",
      "test_documented (admin.tests.A)",
      "Ordering respects the model's Meta. ... ok",
      "test_broken (admin.tests.A)",
      "Deleting cascades. ... FAIL",
      "test_skip (admin.tests.A) ... skipped 'no db'",
    ].join("\n");
    expect(parseDjangoLog(log)).toEqual({
      "test_plain (admin.tests.A)": "PASSED",
      "test_documented (admin.tests.A)": "PASSED",
      "test_broken (admin.tests.A)": "FAILED",
      "test_skip (admin.tests.A)": "SKIPPED",
    });
  });
});

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), "polar-eval-test-"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const git = (cwd: string, ...args: string[]) =>
  // The session folder may belong to the session's own uid (a root gateway): git on the host must
  // not refuse it as another user's repository.
  execFileSync(
    "git",
    ["-c", "safe.directory=*", "-c", "user.email=p@example.com", "-c", "user.name=polar", ...args],
    {
      cwd,
    },
  ).toString();

async function runtimeWithRepo(name: string): Promise<{ rt: Runtime; repo: string; base: string }> {
  const rt = await LocalRuntime.create(RuntimeSpec.parse({}), {
    workRoot: root,
    name,
    session_id: name,
    node_id: "n",
    proxyUrl: "http://127.0.0.1:9",
    settings: { ...DEFAULT_RUNTIME_SETTINGS, local: { sandbox: "never", bwrapPath: "bwrap" } },
    warn() {},
  });
  const repo = rt.workdir;
  await mkdir(path.join(repo, "tests"), { recursive: true });
  await writeFile(
    path.join(repo, "calc.py"),
    "def add(a, b):\n    return a - b\n\ndef sub(a, b):\n    return a - b\n",
  );
  await writeFile(
    path.join(repo, "tests", "test_calc.py"),
    "from calc import add, sub\n\ndef test_sub():\n    assert sub(5, 3) == 2\n",
  );
  await writeFile(
    path.join(repo, "conftest.py"),
    "import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n",
  );
  git(repo, "init", "-q", ".");
  git(repo, "add", "-A");
  git(repo, "commit", "-qm", "base");
  return { rt, repo, base: git(repo, "rev-parse", "HEAD").trim() };
}

function evalCtx(
  rt: Runtime,
  config: Record<string, unknown>,
  evalRuntime: Runtime | null = null,
): EvalContext {
  return {
    session: SessionAssignment.parse({
      session_id: "e.t.0",
      batch_id: "e",
      task_id: "t",
      attempt: 1,
      instruction: "fix add",
      timeout_seconds: 60,
      runtime: null,
      agent: { harness: "shell", custom_shell: { command: "true" } },
      builder: { strategy: "per_request" },
      evaluator: null,
      metadata: {},
      dispatch_priority: 0,
    }),
    trajectory: { status: "COMPLETED", traces: [], metadata: {}, error: null },
    config,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: root },
    runtime: rt,
    evalRuntime,
    agentResult: null,
    timeoutMs: 60_000,
    signal: new AbortController().signal,
  };
}

describeWith(
  ["pytest"],
  "swebench_harness end to end on a local repository with pytest",
  { timeout: 60_000 },
  () => {
    it("reward 1 for the fixing patch, 0 for a wrong one, via a fresh eval runtime", async () => {
      for (const [fix, expected] of [
        ["    return a + b", 1],
        ["    return a * b", 0],
      ] as const) {
        const agent = await runtimeWithRepo(`agent-${expected}`);
        const fresh = await runtimeWithRepo(`fresh-${expected}`);
        await rm(path.join(fresh.repo, "calc.py"));
        git(fresh.repo, "checkout", "-q", "--", "calc.py");
        await writeFile(
          path.join(agent.repo, "calc.py"),
          `def add(a, b):\n${fix}\n\ndef sub(a, b):\n    return a - b\n`,
        );
        const r = await swebenchHarness(
          evalCtx(
            agent.rt,
            {
              instance: { ...INSTANCE, base_commit: fresh.base },
              repo_dir: agent.repo,
              patch_command: "git add -A && git diff --cached --binary",
              test_cmd: "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider",
            },
            fresh.rt,
          ),
        );
        expect(r.outcome_reward, JSON.stringify(r.metadata)).toBe(expected);
        expect(r.metadata).toMatchObject({
          fresh_eval_runtime: true,
          apply_method: "git",
          // A pytest command: graded from pytest's JUnit report, held to the runner guard's records.
          report_mode: "junit",
          weak_report: false,
          verdict: "clean",
          test_exit_status: expected === 1 ? 0 : 1,
          runner_guard: { applicable: true, violations: [] },
        });
        expect(r.metadata.grading_report).toMatchObject({
          patch_successfully_applied: true,
          resolved: expected === 1,
        });
        await agent.rt.teardown({ keep: false });
        await fresh.rt.teardown({ keep: false });
      }
    });

    /** Grades `calc` (the agent's calc.py) and `extra` files with swebench_harness in a fresh runtime. */
    async function grade(
      name: string,
      calc: string,
      extra: Record<string, string>,
      config: Record<string, unknown> = {},
    ) {
      const agent = await runtimeWithRepo(`agent-${name}`);
      const fresh = await runtimeWithRepo(`fresh-${name}`);
      await writeFile(path.join(agent.repo, "calc.py"), calc);
      for (const [file, text] of Object.entries(extra)) await writeFile(path.join(agent.repo, file), text);
      const r = await swebenchHarness(
        evalCtx(
          agent.rt,
          {
            instance: { ...INSTANCE, base_commit: fresh.base },
            repo_dir: agent.repo,
            patch_command: "git add -A && git diff --cached --binary",
            test_cmd: "python3 -m pytest --no-header -rA --tb=no -p no:cacheprovider",
            ...config,
          },
          fresh.rt,
        ),
      );
      await agent.rt.teardown({ keep: false });
      await fresh.rt.teardown({ keep: false });
      return r;
    }
    const FIXED = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n";
    const BROKEN = "def add(a, b):\n    return a - b\n\ndef sub(a, b):\n    return a - b\n";
    const PATCH_REPORTING = [
      "import _pytest.reports as _reports",
      "_made = _reports.TestReport.from_item_and_call.__func__",
      "def _passed(cls, item, call):",
      "    report = _made(cls, item, call)",
      '    report.outcome, report.longrepr = "passed", None',
      "    return report",
      "_reports.TestReport.from_item_and_call = classmethod(_passed)",
      "",
    ].join("\n");

    it("code under test that patches pytest's reporting: 1 from the log, 0 (runner_tampered) from the report", async () => {
      const weak = await grade("log", `${BROKEN}${PATCH_REPORTING}`, {}, { report: "log" });
      expect(weak).toMatchObject({
        outcome_reward: 1,
        metadata: { report_mode: "status_lines", weak_report: true },
      });
      const held = await grade("junit", `${BROKEN}${PATCH_REPORTING}`, {});
      expect(held.outcome_reward).toBe(0);
      expect(held.metadata).toMatchObject({
        report_mode: "junit",
        verdict: "runner_tampered",
        reward_discarded: true,
        reward_discard_reason: expect.stringMatching(/TestReport\.from_item_and_call/),
      });
    });

    it("a real fix that also touches setup.cfg and pyproject.toml: graded without them, and the verdict says so", async () => {
      const r = await grade("cfg", FIXED, {
        "setup.cfg": "[metadata]\nname = calc\n",
        "pyproject.toml": '[project]\nname = "calc"\n',
      });
      expect(r.outcome_reward).toBe(1);
      expect(r.metadata).toMatchObject({
        verdict: "runner_config_reverted",
        reward_discarded: false,
        discarded_paths: [
          { path: "pyproject.toml", reason: RUNNER_HOOK_REASON },
          { path: "setup.cfg", reason: RUNNER_HOOK_REASON },
        ],
      });
      // The tests themselves are another matter: an edit of the test patch's file is plainly reverted.
      const tests = await grade("tests", BROKEN, { "tests/test_calc.py": "def test_add():\n    pass\n" });
      expect(tests.metadata).toMatchObject({
        verdict: "reverted",
        discarded_paths: [{ path: "tests/test_calc.py", reason: "protected path" }],
      });
    });
  },
);

describe("test_on_output and harbor on the local runtime", { timeout: 60_000 }, () => {
  it("test_on_output: empty patch gives 0; a patch that does not apply in the fresh runtime gives 0", async () => {
    const agent = await runtimeWithRepo("a1");
    const config = {
      test_command: "echo PASSED tests/test_calc.py::test_add",
      report: "status_lines",
      expected_output_json: '{"test_add": "PASSED"}',
      patch_command: "git add -A && git diff --cached --binary",
    };
    const empty = await testOnOutput(evalCtx(agent.rt, config));
    expect(empty).toMatchObject({ outcome_reward: 0, metadata: { empty_generation: true } });
    await writeFile(path.join(agent.repo, "calc.py"), "totally different\n");
    const fresh = await runtimeWithRepo("f1");
    await writeFile(path.join(fresh.repo, "calc.py"), "diverged\n");
    git(fresh.repo, "commit", "-qam", "diverge");
    const bad = await testOnOutput(evalCtx(agent.rt, config, fresh.rt));
    expect(bad).toMatchObject({ outcome_reward: 0, metadata: { failed_apply_patch: true } });
    await expect(() => testOnOutput(evalCtx(agent.rt, { expected_output_json: {} }))).rejects.toThrow(
      /test_command/,
    );
  });

  it("test_on_output falls back to patch(1) with fuzz when git apply refuses a drifted context", async () => {
    const agent = await runtimeWithRepo("a2");
    await writeFile(
      path.join(agent.repo, "calc.py"),
      "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n",
    );
    const fresh = await runtimeWithRepo("f2");
    // The last context line differs: git apply (no fuzz) refuses, patch --fuzz applies.
    await writeFile(
      path.join(fresh.repo, "calc.py"),
      "def add(a, b):\n    return a - b\n\ndef sub(x, y):\n    return x - y\n",
    );
    const r = await testOnOutput(
      evalCtx(
        agent.rt,
        {
          test_command: `grep -q "a + b" calc.py && echo "PASSED x.py::test_add" || echo "FAILED x.py::test_add"`,
          expected_output_json: { test_add: "PASSED" },
          report: "status_lines",
          patch_command: "git add -A && git diff --cached --binary",
        },
        fresh.rt,
      ),
    );
    expect(r, JSON.stringify(r.metadata)).toMatchObject({
      outcome_reward: 1,
      metadata: { apply_method: "patch", resolved: true },
    });
  });

  it("harbor: uploads tests_dir, runs test.sh, reads reward.txt", async () => {
    const { rt } = await runtimeWithRepo("h1");
    const tests = path.join(root, "harbor-tests");
    await mkdir(tests, { recursive: true });
    await writeFile(
      path.join(tests, "test.sh"),
      'grep -q "a - b" "$POLAR_REPO/calc.py" && echo 0.75 > "$VERIFIER_DIR/reward.txt"\n',
    );
    const ctx = evalCtx(rt, { tests_dir: tests });
    ctx.env = { ...ctx.env, POLAR_REPO: rt.workdir };
    const r = await harbor(ctx);
    expect(r).toMatchObject({ outcome_reward: 0.75, metadata: { reward_source: "reward.txt" } });
    await expect(harbor(evalCtx(rt, {}))).rejects.toThrow(/tests_dir/);
  });
});
