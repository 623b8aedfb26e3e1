/**
 * The training loop of examples/trainer/train_loop.py (a trainer written against the
 * polar_trainer package's docs) on the local stack: wrangler dev, the simulated engine, a real
 * gateway in token mode and the calculator task (its real tools agent, graded by
 * `test_on_output`), given as the project's YAML task file, which the trainer reads with the
 * package's `load_task_file`. Five steps, each with the fence (pause → the engine loads version N → resume
 * with N), run as 3 steps and then, restarted on the same folder, 2 more. Staleness is made on
 * purpose: `--max-off-policy-steps 0` and a 3 s training step, so groups that were rolling out
 * across an update are dropped. Checked from outside the trainer: its step lines, the JSONL export
 * (per-token versions), its audit log and the control plane's completion records.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { CompletionRecord } from "../../protocol";
import { describeWith, probe, pythonModule } from "../support/optional-tools";

const TRAINER = join(REPO_ROOT, "examples/trainer/train_loop.py");
const TASK_FILE = join(REPO_ROOT, "examples/calculator/task.yaml");
// The task file is YAML: the package reads it with PyYAML, its `[yaml]` extra.
const PYYAML = pythonModule("yaml", "pyyaml");
const python = probe("python3") === null && probe(PYYAML) === null;

interface StepLine {
  step: number;
  trained_under: number;
  groups: Array<{ group_id: string; version: number; staleness: number }>;
  export: string;
  new_version: number;
  fence: {
    paused: boolean;
    mode: string;
    engines: Record<string, string>;
    version_after: string;
    paused_after: boolean;
  };
}

interface Row {
  step: number;
  group_id: string;
  session_id: string;
  task_id: string;
  tokens: number[];
  prompt_length: number;
  loss_mask: number[];
  rollout_logprobs: number[];
  token_versions: Array<number | null>;
  reward: number;
  advantage: number;
  group_version: number;
  policy_version: number;
  staleness: number;
  removed: boolean;
}

let stack: LocalStack;
let dir: string;
let out: string;
const runId = `loop-${Date.now()}`;
const steps: StepLine[] = [];
const done: Array<{ counters: Record<string, unknown> }> = [];
const runs: Array<{ exitCode: number | undefined; stderr: string }> = [];

async function trainUntil(stepCount: number): Promise<void> {
  const run = await execa(
    "python3",
    [
      TRAINER,
      "--url",
      stack.controlPlane.url,
      "--engine-url",
      stack.engineUrl,
      "--task",
      TASK_FILE,
      "--out",
      out,
      "--run-id",
      runId,
      "--steps",
      String(stepCount),
      "--rollout-batch-size",
      "2",
      "--group-size",
      "2",
      "--max-async-level",
      "2",
      "--max-off-policy-steps",
      "0",
      "--train-seconds",
      "3",
      "--timeout",
      "240",
    ],
    { env: { POLAR_TRAINER_TOKEN: stack.tokens.trainer }, reject: false, timeout: 600_000 },
  );
  runs.push({ exitCode: run.exitCode, stderr: run.stderr });
  for (const line of run.stdout.trim().split("\n").filter(Boolean)) {
    const parsed = JSON.parse(line);
    if (parsed.done) done.push(parsed);
    else steps.push(parsed as StepLine);
  }
}

beforeAll(async () => {
  if (!python) return;
  stack = await startLocalStack({
    gateways: 1,
    engine: "sglang",
    gatewayArgs: ["--max-run=4", "--max-init=4", "--max-postrun=4"],
    // A "GPU" that takes time: turns are in flight when the fence comes.
    engineArgs: ["--decode-tps", "400", "--max-running-requests", "4"],
  });
  dir = mkdtempSync(join(tmpdir(), "polar-train-loop-"));
  out = join(dir, "run");
  // The same run id and folder both times: the second run resumes from the first's checkpoint.
  await trainUntil(3);
  await trainUntil(5);
}, 900_000);

afterAll(async () => {
  await stack?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function exported(): Row[] {
  const folder = join(out, "rollouts");
  return readdirSync(folder)
    .sort()
    .flatMap((f) =>
      readFileSync(join(folder, f), "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Row),
    );
}

describeWith(["python3", PYYAML], "a trainer written against the package's docs runs the loop", () => {
  it("5 steps, 3 then 2 after a restart on the same folder, each with a fence around the engine's update", () => {
    expect(
      runs.map((r) => r.exitCode),
      runs.map((r) => r.stderr).join("\n"),
    ).toEqual([0, 0]);
    expect(steps.map((s) => s.step)).toEqual([1, 2, 3, 4, 5]);
    for (const s of steps) {
      // During the update the queue was paused (drained); after it the engine reports N and the
      // fence holds N, resumed.
      expect(s.fence).toMatchObject({ paused: true, mode: "drain", paused_after: false });
      expect(s.new_version).toBe(s.step);
      expect(s.fence.version_after).toBe(String(s.step));
      expect(s.fence.engines).toEqual({ [stack.engineUrl]: String(s.step) });
      expect(s.trained_under).toBe(s.step - 1);
      expect(s.groups).toHaveLength(2);
      for (const g of s.groups) expect(g).toMatchObject({ version: s.step - 1, staleness: 0 });
    }
    expect(done).toHaveLength(2);
    // The task file's num_samples (4) gives way to --group-size 2, and the trainer says so.
    for (const r of runs)
      expect(r.stderr).toContain("--group-size 2 replaces the task file's num_samples [4]");
  });

  it("the export's per-token versions increase step by step: every trained token of step N was sampled under N-1", () => {
    const rows = exported();
    expect(new Set(rows.map((r) => r.step))).toEqual(new Set([1, 2, 3, 4, 5]));
    // Every sample came from the YAML file's task, under the task_id written there.
    expect(new Set(rows.map((r) => r.task_id))).toEqual(new Set(["calculator-shell"]));
    for (const r of rows) {
      const n = r.tokens.length - r.prompt_length;
      expect(r.loss_mask).toHaveLength(n);
      expect(r.rollout_logprobs).toHaveLength(n);
      expect(r.token_versions).toHaveLength(n);
      const trained = r.token_versions.filter((_, i) => r.loss_mask[i] === 1);
      expect(trained.length).toBeGreaterThan(0);
      expect(new Set(trained)).toEqual(new Set([r.step - 1]));
      expect(r).toMatchObject({ group_version: r.step - 1, policy_version: r.step - 1, staleness: 0 });
    }
    // GRPO within each group of the calculator task: a session above its group's mean reward gets
    // a positive advantage, one below it a negative one; a group whose sessions all scored the same
    // (the simulated policy's draw) carries no signal, so every advantage is 0.
    const byGroup = new Map<string, Row[]>();
    for (const r of rows) byGroup.set(r.group_id, [...(byGroup.get(r.group_id) ?? []), r]);
    expect(byGroup.size).toBe(10);
    let mixed = 0;
    for (const all of byGroup.values()) {
      for (const r of all) if (r.removed) expect(r.advantage).toBe(0);
      const group = all.filter((r) => !r.removed);
      const rewards = group.map((r) => r.reward);
      if (Math.max(...rewards) === Math.min(...rewards)) {
        for (const r of group) expect(r.advantage).toBe(0);
        continue;
      }
      mixed++;
      const mean = rewards.reduce((a, b) => a + b, 0) / rewards.length;
      for (const r of group) {
        if (r.reward > mean) expect(r.advantage).toBeGreaterThan(0);
        else expect(r.advantage).toBeLessThan(0);
      }
    }
    expect(mixed).toBeGreaterThan(0);
  });

  it("groups rolling out across an update are dropped as stale, counted, and never trained on", () => {
    const audit = readFileSync(join(out, "polar-state", "audit.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { event: string; group_id?: string; reason?: string });
    const drops = audit.filter((e) => e.event === "drop");
    expect(drops.length).toBeGreaterThan(0);
    expect(new Set(drops.map((e) => e.reason))).toEqual(new Set(["stale"]));
    const counted = done.reduce((n, d) => n + ((d.counters.dropped as Record<string, number>).stale ?? 0), 0);
    // The second run's counters carry on from the first's (the state is durable).
    expect((done[1]!.counters.dropped as Record<string, number>).stale).toBe(drops.length);
    expect(counted).toBeGreaterThanOrEqual(drops.length);
    const trained = new Set(exported().map((r) => r.group_id));
    for (const d of drops) expect(trained.has(d.group_id!)).toBe(false);
    // No group trained twice across the restart.
    const perStep = steps.flatMap((s) => s.groups.map((g) => g.group_id));
    expect(new Set(perStep).size).toBe(perStep.length);
  });

  it("the engine ran with the stack's latency model", async () => {
    const stats = (await (await fetch(`${stack.engineUrl}/sim/stats`)).json()) as {
      config: { decode_tokens_per_second: number; max_running_requests: number };
      busy_seconds: number;
    };
    expect(stats.config).toMatchObject({ decode_tokens_per_second: 400, max_running_requests: 4 });
    expect(stats.busy_seconds).toBeGreaterThan(1);
  });

  it("the control plane's records of a step-3 session: every call labelled 2 and served by weights 2", async () => {
    const row = exported().find((r) => r.step === 3)!;
    const res = await fetch(`${stack.controlPlane.url}/v1/sessions/${row.session_id}/completions`, {
      headers: { authorization: `Bearer ${stack.tokens.trainer}` },
    });
    expect(res.status).toBe(200);
    const records = (await res.json()) as CompletionRecord[];
    expect(records.length).toBeGreaterThan(0);
    for (const r of records)
      expect([r.policy_version, r.weight_version_start, r.weight_version]).toEqual(["2", "2", "2"]);
  });
});
