/**
 * The Python trainer example (examples/trainer/polar_client.py, a user of the polar_trainer
 * package in clients/python) against the real local stack: its command line submits the calculator
 * task and prints one line per result, then a Python snippet reads the same batch with the package's
 * `iter_results` (whole, and resumed from a cursor), turns each result into training samples with
 * `classify`, checks `status` and `cancel`, and prints JSON the test checks here. A wrong token must
 * surface as `PolarError` with code `unauthorized`. The package's own suites run in
 * test/e2e/python-package.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { describeWith, probe } from "../support/optional-tools";

const CLIENT = join(REPO_ROOT, "examples/trainer/polar_client.py");
const PACKAGE_SRC = join(REPO_ROOT, "clients/python/src");

const python = probe("python3") === null;

interface Sample {
  tokens: number[];
  prompt_length: number;
  loss_mask: number[];
  rollout_logprobs: number[];
  token_versions: Array<number | null>;
  reward: number;
  session_id: string;
  status: string;
}

interface SnippetOutput {
  seqs: number[];
  resumed_seqs: number[];
  samples: Sample[][];
  response_lens: number[][];
  status: { status: string; sessions: number };
  cancelled: { status: string; cancelled_at: number | null; cancel: { status: string } };
}

// Reads the finished batch through the package: every result, then resumed after the second one.
const SNIPPET = `
import dataclasses, json, os, sys
sys.path.insert(0, os.environ["PACKAGE_SRC"])
from polar_trainer import PolarClient
from polar_trainer.samples import classify
c = PolarClient(os.environ["POLAR_URL"], os.environ["POLAR_TRAINER_TOKEN"])
batch_id = os.environ["BATCH_ID"]
pairs = list(c.iter_results(batch_id, wait=5, timeout=60))
resumed = list(c.iter_results(batch_id, after=pairs[1][0], wait=5, timeout=60))
out = {
  "seqs": [s for s, _ in pairs],
  "resumed_seqs": [s for s, _ in resumed],
  "samples": [[dataclasses.asdict(s) for s in classify(r, trajectory_index=i).samples] for i, (_, r) in enumerate(pairs)],
  "response_lens": [[len(t["response_ids"]) for t in r["trajectory"]["traces"]] for _, r in pairs],
  "status": c.status(batch_id),
}
spare = dict(json.loads(os.environ["TASKS_JSON"]), batch_id=batch_id + "-cancelled")
c.submit(spare)
cancel = c.cancel(spare["batch_id"])
out["cancelled"] = dict(c.status(spare["batch_id"]), cancel=cancel)
print(json.dumps(out))
`;

let stack: LocalStack;
let dir: string;
let taskPath: string;
let batchId: string;
let cliLines: Array<{
  seq: number;
  session_id: string;
  status: string;
  reward: number | null;
  traces: number;
}>;

beforeAll(async () => {
  if (!python) return;
  stack = await startLocalStack({ gateways: 1 });
  dir = mkdtempSync(join(tmpdir(), "polar-pytrainer-"));
  batchId = `py-trainer-${Date.now()}`;
  const batch = loadTaskFile(join(REPO_ROOT, "examples/calculator/task.yaml"), { batchId });
  taskPath = join(dir, "task.json");
  writeFileSync(taskPath, JSON.stringify(batch));
  const run = await execa("python3", [CLIENT, stack.controlPlane.url, taskPath], {
    env: { POLAR_TRAINER_TOKEN: stack.tokens.trainer },
    timeout: 170_000,
  });
  cliLines = run.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
});

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describeWith(["python3"], "python trainer client on the calculator task", () => {
  it("the command line submits the task and prints one line per result: 4 results, rewards 0 and 1", () => {
    expect(cliLines).toHaveLength(4);
    expect(cliLines.map((l) => l.status)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"]);
    expect(cliLines.map((l) => l.reward).sort()).toEqual([0, 0, 1, 1]);
    for (const l of cliLines) expect(l.traces).toBeGreaterThan(0);
  });

  it("iter_results + classify give aligned samples; resume from a cursor; status; cancel", async () => {
    const run = await execa("python3", ["-c", SNIPPET], {
      env: {
        PACKAGE_SRC,
        POLAR_URL: stack.controlPlane.url,
        POLAR_TRAINER_TOKEN: stack.tokens.trainer,
        BATCH_ID: batchId,
        TASKS_JSON: readFileSync(taskPath, "utf8"),
      },
      timeout: 120_000,
    });
    const out = JSON.parse(run.stdout) as SnippetOutput;
    expect(out.seqs).toEqual(cliLines.map((l) => l.seq));
    expect(out.resumed_seqs).toEqual(out.seqs.slice(2));
    expect(out.status).toMatchObject({ status: "completed", sessions: 4 });
    expect(out.cancelled.cancel.status).toBe("cancelled");
    expect(out.cancelled.cancelled_at).toEqual(expect.any(Number));

    expect(out.samples).toHaveLength(4);
    const rewards = out.samples.map((s) => s[0]!.reward).sort();
    expect(rewards).toEqual([0, 0, 1, 1]);
    out.samples.forEach((samples, r) => {
      expect(samples).toHaveLength(cliLines[r]!.traces);
      samples.forEach((s, t) => {
        const responseLen = out.response_lens[r]![t]!;
        expect(responseLen).toBeGreaterThan(0);
        expect(s.prompt_length).toBeGreaterThan(0);
        expect(s.tokens.length).toBe(s.prompt_length + responseLen);
        // Per response token: mask, logprob and version (slime's convention).
        expect(s.loss_mask.length).toBe(responseLen);
        expect(s.rollout_logprobs.length).toBe(responseLen);
        expect(s.token_versions.length).toBe(responseLen);
        expect(s.loss_mask.some((m) => m === 1)).toBe(true);
        for (const lp of s.rollout_logprobs) expect(lp).toBeLessThanOrEqual(0);
        expect(s.session_id).toBe(cliLines[r]!.session_id);
        expect(s.reward).toBe(cliLines[r]!.reward);
        expect(s.status).toBe("completed");
      });
    });
  });

  it("a wrong token ends the command line with PolarError unauthorized, exit code 1", async () => {
    const run = await execa("python3", [CLIENT, stack.controlPlane.url, taskPath], {
      env: { POLAR_TRAINER_TOKEN: "not-the-trainer-token" },
      reject: false,
      timeout: 30_000,
    });
    expect(run.exitCode).toBe(1);
    expect(run.stdout).toBe("");
    expect(run.stderr).toMatch(/PolarError unauthorized \(401\)/);
  });

  it("without POLAR_TRAINER_TOKEN the command line names the variable, exit code 2", async () => {
    const run = await execa("python3", [CLIENT, stack.controlPlane.url, taskPath], {
      env: { POLAR_TRAINER_TOKEN: "" },
      reject: false,
    });
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain("POLAR_TRAINER_TOKEN");
  });
});
