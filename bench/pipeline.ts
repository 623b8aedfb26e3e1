/**
 * `npm run bench:pipeline`: what the async group scheduler buys over synchronous batches, on one
 * long-tail agentic workload, on this machine's local stack (control plane in `wrangler dev`, one
 * real gateway in token mode, the simulated SGLang engine with its latency model).
 *
 * The workload (every parameter is a flag; the defaults are what docs/training.md's table used):
 *
 * - Each session runs bench/pipeline-agent.mjs, an OpenAI-tools agent through the gateway's
 *   recording proxy: N times, it asks an arithmetic question with a `calculator` tool offered, the
 *   model answers with a tool call, the agent runs the "tool" for t seconds, sends the result, the
 *   model answers. 2N model calls, N tool calls per session, one growing conversation.
 * - N ~ discrete Pareto: N = min(`--max-calls` 16, floor(`--xm` 2 · U^(−1/`--alpha` 1.3))), so
 *   P(N ≥ n) = (2/n)^1.3: median 3, mean 4.7, 10% of sessions 12 or more, 6.7% at the cap.
 * - t ~ lognormal, per tool call: min(`--tool-max` 30, `--tool-median` 0.5 · e^(`--tool-sigma` 1.2 · Z))
 *   seconds: median 0.5 s, mean 1.0 s, p99 8 s.
 * - Draws are seeded by (`--seed`, group index, sample index), so group i's sessions do the same
 *   work in both schedules.
 * - The engine: prefill `--prefill-tps` 20000 tokens/s, decode `--decode-tps` 40 tokens/s per
 *   request, at most `--max-running-requests` 8 requests decoding at once (the rest wait in FIFO).
 *   A model call samples 27 to 43 tokens here, so about 0.7 to 1.1 s of decode.
 * - The gateway: `--max-run` 32 sessions running, `--max-init` 8 preparing, `--max-postrun` 8
 *   grading; its READY stage is the warm pool (prepared sessions wait for a run slot).
 * - The trainer: `--rollout-batch-size` 4 groups of `--group-size` 4 per step, `--steps` 12 steps,
 *   a simulated training step of `--train-seconds` 10 (a sleep), then the fenced weight update
 *   (pause in drain mode → the engine's `/update_weights_from_disk` with the new version → resume
 *   with it), in both schedules.
 *
 * Schedules (bench/pipeline_driver.py drives them with the polar_trainer package), `--modes`, in
 * order, comma-separated:
 * (a) `sync`: submit `rollout_batch_size` groups, wait for every session, train, update, repeat;
 * (b) `async`: `GroupScheduler` with the package's defaults, `--max-async-level` 2 and
 *     `--max-off-policy-steps` (by default the package's, = max_async_level: groups staler than
 *     that are dropped); settings after colons override them for one row, so one run compares
 *     several: `async:level=N`, `:bound=N` (max_off_policy_steps), `:admission=in_flight|staleness`,
 *     `:order=accepted|oldest` (consume_order), `:fence=drain|abort` (the weight update's fence
 *     mode), `:end=known` (max_steps = `--steps`), `:priority=oldest_first|none` (the tasks'
 *     `engine_priority`: −group index, the package's default, or unset; `sync:priority=…` too), e.g.
 *     `--modes sync,async:admission=in_flight:order=accepted,async:bound=4:end=known:fence=abort`.
 * - The engine schedules by request priority as SGLang does with `--enable-priority-scheduling`
 *   (higher first, preempting a running request past a difference of `--preemption-threshold`,
 *   SGLang's default 10) unless `--engine-priority-scheduling off`; the gateway reads that from the
 *   engine's `/server_info`.
 *
 * Reported per schedule: wall time (first submit → last step's commit), groups trained per minute
 * (every trained group was accepted; `accepted` counts the async groups accepted but not yet
 * trained or later dropped too), the engine's busy fraction (sim `busy_seconds` — time with at
 * least one request running — over the wall time) and its mean occupancy (running-request seconds
 * over wall × max running requests), the staleness histogram of trained groups, stale drops, the
 * mean wait of a step for its groups, and the 1-minute load average; the same from the end of
 * step 1 on (leaving out the async pipeline's fill). Then the ratios (b)/(a).
 * Wall-clock on a shared machine: the load average says how shared.
 *
 * Run: `npm run bench:pipeline` (flags above; `--modes sync,async`; `--out FILE` writes the rows
 * as JSON).
 */

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { execa } from "execa";
import { startLocalStack } from "../cli/local-stack";
import { REPO_ROOT } from "../cli/wrangler-dev";

const { values } = parseArgs({
  options: {
    steps: { type: "string", default: "12" },
    "rollout-batch-size": { type: "string", default: "4" },
    "group-size": { type: "string", default: "4" },
    "max-async-level": { type: "string", default: "2" },
    "max-off-policy-steps": { type: "string", default: "" },
    "train-seconds": { type: "string", default: "10" },
    seed: { type: "string", default: "1" },
    xm: { type: "string", default: "2" },
    alpha: { type: "string", default: "1.3" },
    "max-calls": { type: "string", default: "16" },
    "tool-median": { type: "string", default: "0.5" },
    "tool-sigma": { type: "string", default: "1.2" },
    "tool-max": { type: "string", default: "30" },
    "prefill-tps": { type: "string", default: "20000" },
    "decode-tps": { type: "string", default: "40" },
    "max-running-requests": { type: "string", default: "8" },
    "max-run": { type: "string", default: "32" },
    "max-init": { type: "string", default: "8" },
    "max-postrun": { type: "string", default: "8" },
    modes: { type: "string", default: "sync,async" },
    "engine-priority-scheduling": { type: "string", default: "on" },
    "preemption-threshold": { type: "string", default: "10" },
    out: { type: "string", default: "" },
  },
});

function num(name: keyof typeof values): number {
  const v = Number(values[name]);
  if (!Number.isFinite(v) || v < 0) {
    console.error(`bench:pipeline: --${name} must be a number >= 0, got '${values[name]}'`);
    process.exit(2);
  }
  return v;
}

/** One schedule of `--modes`: `sync`, or `async` with its own settings after colons. */
interface Mode {
  spec: string;
  mode: "sync" | "async";
  level: number;
  bound: number | null;
  admission: string | null;
  order: string | null;
  fence: string;
  /** The scheduler is told the run's length (`max_steps` = `--steps`). */
  end: boolean;
  /** Tasks' `engine_priority`: `oldest_first` (the package's default, −group index) or `none`. */
  priority: string;
}
const MODE_KEYS: Record<string, RegExp> = {
  level: /^[1-9][0-9]*$/,
  bound: /^[0-9]+$/,
  admission: /^(in_flight|staleness)$/,
  order: /^(accepted|oldest)$/,
  fence: /^(drain|abort)$/,
  end: /^(known|open)$/,
  priority: /^(oldest_first|none)$/,
};
function parseMode(spec: string): Mode {
  const [mode, ...settings] = spec.split(":");
  const syncKeys = settings.every((s) => s.startsWith("priority="));
  if ((mode !== "sync" && mode !== "async") || (mode === "sync" && !syncKeys)) {
    console.error(
      `bench:pipeline: --modes takes sync[:priority=oldest_first|none] and async[:level=N][:bound=N][:admission=in_flight|staleness][:order=accepted|oldest][:fence=drain|abort][:end=known|open][:priority=oldest_first|none], got '${spec}'`,
    );
    process.exit(2);
  }
  const kv: Record<string, string> = {};
  for (const s of settings) {
    const [k, v] = s.split("=");
    if (k === undefined || v === undefined || !MODE_KEYS[k]?.test(v)) {
      console.error(
        `bench:pipeline: --modes: '${s}' in '${spec}' is not one of level=N, bound=N, admission=in_flight|staleness, order=accepted|oldest, fence=drain|abort, end=known|open, priority=oldest_first|none`,
      );
      process.exit(2);
    }
    kv[k] = v;
  }
  const bound = kv.bound ?? values["max-off-policy-steps"];
  return {
    spec,
    mode,
    level: Number(kv.level ?? num("max-async-level")),
    bound: bound === "" ? null : Number(bound),
    admission: kv.admission ?? null,
    order: kv.order ?? null,
    fence: kv.fence ?? "drain",
    end: kv.end === "known",
    priority: kv.priority ?? "oldest_first",
  };
}
const modes = values.modes.split(",").map(parseMode);

const agent = [
  `--seed ${num("seed")}`,
  `--xm ${num("xm")}`,
  `--alpha ${num("alpha")}`,
  `--max-calls ${num("max-calls")}`,
  `--tool-median ${num("tool-median")}`,
  `--tool-sigma ${num("tool-sigma")}`,
  `--tool-max ${num("tool-max")}`,
].join(" ");
const maxRunning = num("max-running-requests");
if (!["on", "off"].includes(values["engine-priority-scheduling"])) {
  console.error(
    `bench:pipeline: --engine-priority-scheduling must be on or off, got '${values["engine-priority-scheduling"]}'`,
  );
  process.exit(2);
}

interface DriverResult {
  mode: string;
  wall_seconds: number;
  trained_groups: number;
  accepted_groups: number;
  staleness: Record<string, number>;
  dropped: Record<string, number>;
  rejected: Record<string, number>;
  sessions: Record<string, number>;
  steps: Array<{
    wait: number;
    train: number;
    fence: number;
    trained: number;
    end: number;
    engine_busy_seconds: number;
    engine_running_request_seconds: number;
  }>;
  engine: {
    busy_seconds: number;
    running_request_seconds: number;
    generation_tokens_total: number;
    finished_total: number;
    queue_seconds_total: number;
  };
}

const stack = await startLocalStack({
  gateways: 1,
  engine: "sglang",
  engineArgs: [
    ...(values["engine-priority-scheduling"] === "on"
      ? [
          "--enable-priority-scheduling",
          "--priority-scheduling-preemption-threshold",
          String(num("preemption-threshold")),
        ]
      : []),
    "--prefill-tps",
    String(num("prefill-tps")),
    "--decode-tps",
    String(num("decode-tps")),
    "--max-running-requests",
    String(maxRunning),
  ],
  gatewayArgs: [
    `--max-run=${num("max-run")}`,
    `--max-init=${num("max-init")}`,
    `--max-postrun=${num("max-postrun")}`,
  ],
});
/** A row's name in the tables: its settings, the package's defaults named as such. */
function label(m: Mode): string {
  const priority = m.priority === "none" ? ", no engine priority" : "";
  if (m.mode === "sync") return `synchronous batches${priority}`;
  const bound = m.bound ?? m.level;
  // null: the package's defaults (in-flight admission, acceptance order).
  const parts = [
    m.admission === "staleness"
      ? `admission by staleness, bound ${bound}`
      : `in flight ≤ ${m.level} × batch, bound ${bound}`,
    m.order === "oldest" ? "oldest first" : "acceptance order",
    m.fence === "abort" ? "abort fence" : "drain fence",
    m.end ? "max_steps set" : "",
  ];
  return `async, ${parts.filter((p) => p !== "").join(", ")}${priority}`;
}
const dir = mkdtempSync(join(tmpdir(), "polar-bench-pipeline-"));
const rows: Array<DriverResult & { spec: string; label: string; load: number }> = [];
try {
  for (const m of modes) {
    const mode = m.mode;
    const config = {
      url: stack.controlPlane.url,
      token: stack.tokens.trainer,
      engine_url: stack.engineUrl,
      mode,
      run_id: `bench-${mode}-${Date.now()}`,
      steps: num("steps"),
      rollout_batch_size: num("rollout-batch-size"),
      group_size: num("group-size"),
      max_async_level: m.level,
      max_off_policy_steps: m.bound,
      admission: m.admission,
      consume_order: m.order,
      fence_mode: m.fence,
      engine_priority: m.priority,
      max_steps: m.end ? num("steps") : null,
      train_seconds: num("train-seconds"),
      agent,
      agent_path: join(REPO_ROOT, "bench/pipeline-agent.mjs"),
      timeout_seconds: 1800,
      state_dir: join(dir, `${rows.length}-${mode}`), // one state folder per row: a run id owns it
    };
    console.error(`bench:pipeline: ${m.spec} …`);
    const run = await execa(
      "python3",
      [join(REPO_ROOT, "bench/pipeline_driver.py"), JSON.stringify(config)],
      {
        reject: false,
        stderr: "inherit",
      },
    );
    if (run.exitCode !== 0)
      throw new Error(`the ${m.spec} driver failed (exit ${run.exitCode})\n${run.stdout}`);
    rows.push({
      ...(JSON.parse(run.stdout.trim().split("\n").at(-1)!) as DriverResult),
      spec: m.spec,
      label: label(m),
      load: loadavg()[0]!,
    });
    // Written after each row, so a later row's failure keeps the rows measured before it.
    if (values.out !== "") writeFileSync(values.out, `${JSON.stringify(rows, null, 1)}\n`);
  }
} finally {
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}

const perMin = (r: DriverResult, n: number) => (n * 60) / r.wall_seconds;
const hist = (h: Record<string, number>) =>
  Object.entries(h)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([k, v]) => `${k}:${v}`)
    .join(" ") || "–";
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);

console.log(
  `\nworkload: ${num("rollout-batch-size")} groups × ${num("group-size")} sessions per step, ${num("steps")} steps, ` +
    `train ${num("train-seconds")} s; agent ${agent}; engine decode ${num("decode-tps")} tok/s, ` +
    `prefill ${num("prefill-tps")} tok/s, max running ${maxRunning}, priority scheduling ${values["engine-priority-scheduling"]} ` +
    `(preemption threshold ${num("preemption-threshold")}); ` +
    `gateway max_run ${num("max-run")}\n`,
);
console.log(
  "| schedule | wall | groups trained | trained groups/min | accepted groups/min | engine busy | engine occupancy | staleness (trained) | stale dropped | mean step wait | mean fence | load |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|");
for (const r of rows) {
  const occupancy =
    maxRunning > 0 ? r.engine.running_request_seconds / (r.wall_seconds * maxRunning) : Number.NaN;
  console.log(
    `| ${r.label} ` +
      `| ${r.wall_seconds.toFixed(0)} s | ${r.trained_groups} | ${perMin(r, r.trained_groups).toFixed(2)} ` +
      `| ${perMin(r, r.accepted_groups).toFixed(2)} | ${((100 * r.engine.busy_seconds) / r.wall_seconds).toFixed(1)}% ` +
      `| ${(100 * occupancy).toFixed(1)}% | ${hist(r.staleness)} | ${r.dropped.stale ?? 0} ` +
      `| ${mean(r.steps.map((s) => s.wait)).toFixed(1)} s | ${mean(r.steps.map((s) => s.fence)).toFixed(2)} s | ${r.load.toFixed(1)} |`,
  );
}
/** Steps 2..S: the same figures without the first step (the async pipeline's fill). */
function steady(r: DriverResult) {
  const first = r.steps[0]!;
  const last = r.steps.at(-1)!;
  const wall = last.end - first.end;
  const trained = r.steps.slice(1).reduce((n, s) => n + s.trained, 0);
  return {
    wall,
    perMin: (trained * 60) / wall,
    busy: (100 * (last.engine_busy_seconds - first.engine_busy_seconds)) / wall,
    occupancy:
      (100 * (last.engine_running_request_seconds - first.engine_running_request_seconds)) /
      (wall * maxRunning),
  };
}
if (rows.every((r) => r.steps.length > 1)) {
  console.log(`\nsteps 2–${num("steps")} (from the end of step 1):\n`);
  console.log("| schedule | wall | trained groups/min | engine busy | engine occupancy |");
  console.log("|---|---:|---:|---:|---:|");
  for (const r of rows) {
    const st = steady(r);
    console.log(
      `| ${r.spec} | ${st.wall.toFixed(0)} s | ${st.perMin.toFixed(2)} | ${st.busy.toFixed(1)}% | ${st.occupancy.toFixed(1)}% |`,
    );
  }
}
const a = rows.find((r) => r.mode === "sync");
for (const b of rows.filter((r) => r.mode === "async")) {
  if (!a) break;
  const ratio = perMin(b, b.trained_groups) / perMin(a, a.trained_groups);
  const acceptedRatio = perMin(b, b.accepted_groups) / perMin(a, a.accepted_groups);
  const busy = (100 * b.engine.busy_seconds) / b.wall_seconds;
  const bar = (x: number, y: number) => (x >= 3 && y >= 95 ? "met" : "not met");
  console.log(
    `\n${b.spec} / sync, whole runs: trained groups/min ${ratio.toFixed(2)}×, accepted groups/min ${acceptedRatio.toFixed(2)}×; ` +
      `async engine busy ${busy.toFixed(1)}% (the bar, ≥ 3× trained groups/min with ≥ 95% busy: ${bar(ratio, busy)})`,
  );
  if (a.steps.length > 1 && b.steps.length > 1) {
    const sa = steady(a);
    const sb = steady(b);
    console.log(
      `${b.spec} / sync, steps 2–${num("steps")}: trained groups/min ${(sb.perMin / sa.perMin).toFixed(2)}×; ` +
        `async engine busy ${sb.busy.toFixed(1)}%`,
    );
  }
}
for (const r of rows) {
  const rejected = Object.entries(r.rejected).map(([k, v]) => `${k} ${v}`);
  const sessions = Object.entries(r.sessions).map(([k, v]) => `${k} ${v}`);
  console.log(
    `${r.spec}: sessions ${sessions.join(", ")}; rejected ${rejected.join(", ") || "none"}; ` +
      `engine ${r.engine.finished_total} calls, ${r.engine.generation_tokens_total} tokens, ` +
      `queue wait ${r.engine.queue_seconds_total.toFixed(0)} s in total; step waits ${r.steps.map((s) => s.wait.toFixed(0)).join(" ")} s`,
  );
}
