/**
 * The generated task run for real by a gateway with podman: a stand-in SWE-bench image (the
 * repository at `/testbed`, committed at the row's `base_commit`), the generated prepare step,
 * a shell "agent" that edits the workspace, and the gateway's own `swebench_harness` evaluator
 * grading in a fresh container — extract from the workspace, apply to `/testbed`, reset the test
 * files, apply `test_patch`, run pytest between the markers, grade FAIL_TO_PASS/PASS_TO_PASS.
 *
 * Real SWE-bench images need a registry; the stand-in is built here from the gateway tests'
 * local busybox+git image. Its Python is the host's, mounted read-only (the part the image's
 * conda env plays on a GPU host), so the test needs pytest in the host's `python3`.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { FakeControlPlane } from "../../gateway-agent/testing/fake-control-plane";
import { type GatewayRig, startGatewayRig } from "../../gateway-agent/testing/gateway-rig";
import { ensureTestImage, PODMAN_SETTINGS } from "../../gateway-agent/testing/images";
import { isResultOf } from "../../gateway-agent/testing/session-fixtures";
import { AssignMessage, BatchRequest, type TaskSpec, WIRE_VERSION } from "../../protocol";
import { describeWith, type OptionalTool } from "../../test/support/optional-tools";
import { DEFAULT_OPTIONS, generateBatch, parseInstances, swebenchImageId } from "./generate-tasks";

const INSTANCE_ID = "polar-fixtures__textkit-1";
const IMAGE_TEMPLATE = "localhost/polar-swebench-fixture:{id}";
const TOKEN = "swebench-test-token";

/** The host's Python prefix, when its `python3` has pytest (else the test is skipped). */
function pythonPrefix(): string | null {
  try {
    const prefix = execFileSync("python3", ["-c", "import sys, pytest; print(sys.prefix)"]).toString().trim();
    return existsSync(path.join(prefix, "bin", "pytest")) ? prefix : null;
  } catch {
    return null;
  }
}
const prefix = pythonPrefix();
/** The container runs the host's pytest from its prefix, mounted read-only at the same path. */
const PYTEST_IN_PREFIX: OptionalTool = {
  name: "pytest",
  install: "pip install pytest",
  probe: () =>
    prefix === null
      ? "python3 has no pytest whose `pytest` script is in the interpreter's prefix (bin/pytest)"
      : null,
};

const SOURCE = 'def word_count(text):\n    """Number of words in text."""\n    return len(text.split(" "))\n';
const TEST_PATCH = `diff --git a/tests/test_textkit.py b/tests/test_textkit.py
--- a/tests/test_textkit.py
+++ b/tests/test_textkit.py
@@ -3,3 +3,7 @@ from textkit import word_count
 
 def test_single_word():
     assert word_count("hello") == 1
+
+
+def test_runs_of_whitespace():
+    assert word_count("one  two three") == 3
`;

/** The fixture repository, committed with a fixed identity and date. */
async function makeTestbed(dir: string): Promise<string> {
  await mkdir(path.join(dir, "textkit"), { recursive: true });
  await mkdir(path.join(dir, "tests"), { recursive: true });
  await writeFile(path.join(dir, "textkit", "__init__.py"), SOURCE);
  await writeFile(
    path.join(dir, "tests", "test_textkit.py"),
    'from textkit import word_count\n\n\ndef test_single_word():\n    assert word_count("hello") == 1\n',
  );
  // pytest's rootdir conftest puts the repository on sys.path (SWE-bench images install it instead).
  await writeFile(path.join(dir, "conftest.py"), "");
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: "polar",
    GIT_AUTHOR_EMAIL: "polar@localhost",
    GIT_AUTHOR_DATE: "2024-01-01T00:00:00Z",
    GIT_COMMITTER_NAME: "polar",
    GIT_COMMITTER_EMAIL: "polar@localhost",
    GIT_COMMITTER_DATE: "2024-01-01T00:00:00Z",
  };
  const git = (...args: string[]) => execFileSync("git", args, { cwd: dir, env }).toString().trim();
  git("init", "-q", ".");
  git("add", "-A");
  git("commit", "-qm", "textkit base");
  return git("rev-parse", "HEAD");
}

/** The "agent": one model call through the proxy, then an edit of the workspace copy. */
function agentCommand(replacement: string): string {
  const call = [
    "import json, os, urllib.request as u",
    'body = json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": [{"role": "user", "content": "fix word_count"}]}).encode()',
    'req = u.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body, headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})',
    "u.urlopen(req).read()",
  ].join("\n");
  return `python3 -c '${call}' && sed -i 's/return len(text.split(" "))/${replacement}/' textkit/__init__.py && echo scratch > notes.pyc`;
}

describeWith(
  ["podman", PYTEST_IN_PREFIX],
  "swebench_harness on a generated task, with podman",
  { timeout: 240_000 },
  () => {
    let scratch: string;
    let rig: GatewayRig;
    let cp: FakeControlPlane;
    let task: TaskSpec;

    beforeAll(async () => {
      scratch = await mkdtemp(path.join(tmpdir(), "polar-swebench-podman-"));
      const base = await makeTestbed(path.join(scratch, "ctx", "testbed"));
      const image = IMAGE_TEMPLATE.replace("{id}", swebenchImageId(INSTANCE_ID));
      await writeFile(
        path.join(scratch, "ctx", "Containerfile"),
        `FROM ${ensureTestImage()}\nCOPY testbed /testbed\n`,
      );
      execFileSync("podman", [
        ...PODMAN_SETTINGS.globalArgs,
        "build",
        "-q",
        "-t",
        image,
        path.join(scratch, "ctx"),
      ]);

      const row = {
        instance_id: INSTANCE_ID,
        repo: "polar-fixtures/textkit",
        base_commit: base,
        patch: "",
        test_patch: TEST_PATCH,
        problem_statement: "word_count miscounts text with runs of whitespace.",
        hints_text: "",
        created_at: "2024-01-01T00:00:00Z",
        version: "0.1",
        FAIL_TO_PASS: JSON.stringify(["tests/test_textkit.py::test_runs_of_whitespace"]),
        PASS_TO_PASS: JSON.stringify(["tests/test_textkit.py::test_single_word"]),
        environment_setup_commit: base,
      };
      const rows = parseInstances(JSON.stringify(row), "fixture.jsonl");
      const batch = BatchRequest.parse(
        generateBatch(
          rows,
          { ...DEFAULT_OPTIONS, harness: "codex", imageTemplate: IMAGE_TEMPLATE, timeoutSeconds: 200 },
          "fixture.jsonl",
        ),
      );
      task = batch.tasks[0] as TaskSpec;
      expect(task.runtime?.image).toBe(image);

      rig = await startGatewayRig({
        nodeId: "swebench-node",
        token: TOKEN,
        scratch,
        gateway: { runtimeSettings: { docker: PODMAN_SETTINGS } },
      });
      ({ cp } = rig);
    });
    afterAll(async () => {
      await rig?.stop();
    });

    /**
     * The generated task as sent to a gateway, with two changes for this host: a shell agent
     * instead of the preset (no harness CLI offline), and the host's /usr and Python mounted
     * read-only with PATH to them (the stand-in image has only busybox and git).
     */
    function assign(n: number, replacement: string): AssignMessage {
      const runtime = task.runtime as NonNullable<TaskSpec["runtime"]>;
      return AssignMessage.parse({
        v: WIRE_VERSION,
        type: "assign",
        lease_id: `swe-lease-${n}`,
        session: {
          session_id: `swe.${task.task_id}.${n}`,
          batch_id: "swe",
          task_id: task.task_id,
          attempt: 1,
          instruction: task.instruction,
          timeout_seconds: task.timeout_seconds,
          runtime: {
            ...runtime,
            env: { ...runtime.env, PATH: `${prefix}/bin:/usr/bin:/bin` },
            volumes: ["/usr:/usr:ro", ...(prefix?.startsWith("/usr/") ? [] : [`${prefix}:${prefix}:ro`])],
          },
          agent: { harness: "shell", custom_shell: { command: agentCommand(replacement) } },
          builder: task.builder,
          evaluator: task.evaluator,
          metadata: task.metadata,
          dispatch_priority: 0,
        },
      });
    }

    it("the right fix resolves the instance (reward 1); a wrong one does not (reward 0)", async () => {
      const right = assign(1, "return len(text.split())");
      const wrong = assign(2, 'return len(text.split(" ")) + 0');
      cp.send(right);
      cp.send(wrong);
      const r1 = (await cp.waitFor(isResultOf(right.lease_id), 200_000)).result;
      const r0 = (await cp.waitFor(isResultOf(wrong.lease_id), 200_000)).result;

      expect(r1.error).toBeNull();
      expect(r1.status).toBe("COMPLETED");
      expect(r1.reward).toBe(1);
      const e1 = r1.trajectory.metadata.evaluation as Record<string, unknown>;
      expect(e1).toMatchObject({
        strategy: "swebench_harness",
        instance_id: INSTANCE_ID,
        fresh_eval_runtime: true,
        apply_method: "git",
        empty_generation: false,
        excluded_paths: ["notes.pyc"],
        resolved: true,
        grading_report: {
          patch_successfully_applied: true,
          resolved: true,
          tests_status: {
            FAIL_TO_PASS: { success: ["tests/test_textkit.py::test_runs_of_whitespace"], failure: [] },
            PASS_TO_PASS: { success: ["tests/test_textkit.py::test_single_word"], failure: [] },
          },
        },
      });
      expect(r1.trajectory.traces.length).toBeGreaterThan(0);

      expect(r0.error).toBeNull();
      expect(r0.status).toBe("COMPLETED");
      expect(r0.reward).toBe(0);
      expect(r0.trajectory.metadata.evaluation).toMatchObject({
        resolved: false,
        grading_report: {
          patch_successfully_applied: true,
          tests_status: {
            FAIL_TO_PASS: { success: [], failure: ["tests/test_textkit.py::test_runs_of_whitespace"] },
            PASS_TO_PASS: { success: ["tests/test_textkit.py::test_single_word"], failure: [] },
          },
        },
      });
    });
  },
);
