/**
 * `npm run bench:gateway`: the gateway agent under load, in one process with a fake control plane
 * (a real WebSocket server that assigns as fast as credit allows) and the fixture engine.
 *
 * 1. Throughput and memory: N sessions with a sleeping harness (`sleep 2`, no model call) at
 *    N concurrent runs (max_run = N), N = 100 and 1,000: sessions/s from first assign to last
 *    result, and the gateway process's peak RSS (its child processes not included).
 * 2. The same at 100 and 1,000 with what a real session holds: the proxy in token mode (the
 *    simulated engine's `/generate`, the Qwen3 tokenizer, the bridge, the conversation builder)
 *    and each harness in a bubblewrap sandbox (local runtime, sandbox `always`), holding a
 *    three-turn conversation with `curl` and `jq` whose history grows by each reply. Skipped, and
 *    said so, where bwrap, curl or jq is missing.
 * 3. The warm pool's point: time from a run slot's grant to the harness's first command (READY →
 *    RUN start) versus a cold start (runtime start + prepare, then the same), with a container
 *    runtime (podman) when installed, else the local runtime with a `git init` prepare step.
 *
 * Prints a table; asserts nothing. `BENCH_SIZES` (default `100,1000`) sets the session counts.
 *
 * @module
 */

import { spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { type Gateway, startGateway } from "../gateway-agent";
import { type FakeControlPlane, startFakeControlPlane } from "../gateway-agent/testing/fake-control-plane";
import { canBuildTestImage, ensureTestImage, PODMAN_SETTINGS } from "../gateway-agent/testing/images";
import { makeAssign } from "../gateway-agent/testing/session-fixtures";
import type { AssignMessage, ResultMessage } from "../protocol";
import { startFixtureEngine } from "../proxy/testing/fixture-engine";
import { startSimEngine } from "../sim/server";

const TOKEN = "bench-token";
const MODEL = "Qwen/Qwen3-8B";
/** The gateway's own log: warnings and errors on stderr with `BENCH_VERBOSE=1`, else nothing. */
const quiet = process.env.BENCH_VERBOSE
  ? { info() {}, warn: console.error, error: console.error }
  : { info() {}, warn() {}, error() {} };

interface Run {
  results: ResultMessage[];
  seconds: number;
  peakRssMb: number;
}

/** Feeds `tasks` to the gateway as its credit allows; resolves when every result is in. */
async function drive(cp: FakeControlPlane, tasks: AssignMessage[], gateway: Gateway): Promise<Run> {
  let next = 0;
  let credit = 0;
  const results: ResultMessage[] = [];
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 50);
  // A line on stderr every 10 s, so a stalled run shows where it stands.
  const progress = setInterval(
    () => console.error(`  … ${results.length}/${tasks.length} results, ${next} assigned`),
    10_000,
  );
  const started = performance.now();
  await new Promise<void>((resolve) => {
    let seen = 0;
    const pump = () => {
      for (; seen < cp.received.length; seen++) {
        const m = cp.received[seen]?.message;
        if (!m) continue;
        if (m.type === "hello") credit = m.credit;
        if (m.type === "credit") credit += m.grant;
        if (m.type === "result") results.push(m);
      }
      while (credit > 0 && next < tasks.length) {
        cp.send(tasks[next++] as AssignMessage);
        credit--;
      }
      if (results.length >= tasks.length) resolve();
      else setTimeout(pump, 5);
    };
    pump();
  });
  clearInterval(sampler);
  clearInterval(progress);
  void gateway;
  return { results, seconds: (performance.now() - started) / 1000, peakRssMb: peak / 1024 / 1024 };
}

async function withGateway<T>(
  opts: Partial<Parameters<typeof startGateway>[0]>,
  fn: (cp: FakeControlPlane, gateway: Gateway) => Promise<T>,
  engineKind: "fixture" | "simulator" = "fixture",
): Promise<T> {
  const engine =
    engineKind === "fixture"
      ? await startFixtureEngine({ model: MODEL })
      : await startSimEngine({ model: MODEL, seed: 7 });
  const cp = await startFakeControlPlane({ token: TOKEN });
  const scratch = await mkdtemp(path.join(tmpdir(), "polar-bench-gw-"));
  const gateway = await startGateway({
    controlPlaneUrl: cp.url,
    nodeId: "bench",
    token: TOKEN,
    engine: "sglang-openai",
    engineUrl: engine.url,
    model: MODEL,
    workRoot: path.join(scratch, "work"),
    logger: quiet,
    runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
    ...opts,
  });
  try {
    await cp.waitFor((m) => m.type === "hello");
    return await fn(cp, gateway);
  } finally {
    await gateway.stop();
    await cp.close();
    await engine.close();
    await rm(scratch, { recursive: true, force: true });
  }
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};
const ms = (x: number) => `${x.toFixed(1)} ms`;

async function throughput(n: number) {
  return withGateway(
    { maxInit: Math.min(n, 200), maxRun: n, maxPostrun: Math.min(n, 200) },
    async (cp, gateway) => {
      const tasks = Array.from({ length: n }, () =>
        makeAssign({ prefix: `tp${n}`, command: "sleep 2", evaluator: null }),
      );
      const before = process.memoryUsage().rss / 1024 / 1024;
      const run = await drive(cp, tasks, gateway);
      const runStarts = run.results
        .map(
          (r) =>
            (r.result.trajectory.metadata.gateway_timing as { run_start_ms: number | null } | undefined)
              ?.run_start_ms,
        )
        .filter((x): x is number => typeof x === "number");
      const stage = (k: "init_ms" | "ready_ms" | "run_ms" | "postrun_ms") =>
        pct(
          run.results.map((r) => r.result.timing[k]),
          50,
        );
      return {
        n,
        ...run,
        baseRssMb: before,
        runStartP50: pct(runStarts, 50),
        stages: `${[stage("init_ms"), stage("ready_ms"), stage("run_ms"), stage("postrun_ms")].map((x) => (x / 1000).toFixed(1)).join(" / ")} s`,
      };
    },
  );
}

/**
 * A three-turn conversation through the proxy: each turn sends the whole history, the engine's
 * last reply included, as an agent harness does; a second between turns keeps sessions overlapping.
 */
const CONVERSATION = [
  "set -e",
  'u="$OPENAI_BASE_URL/chat/completions"',
  `m='[{"role":"system","content":"You are a careful assistant. Answer briefly."},{"role":"user","content":"Name three prime numbers."}]'`,
  "for turn in 1 2 3; do",
  '  body=$(jq -cn --argjson m "$m" \'{model:"m",messages:$m,max_tokens:48}\')',
  '  reply=$(curl -sf -H "authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" -d "$body" "$u" | jq -c \'.choices[0].message | {role, content}\')',
  '  m=$(jq -cn --argjson m "$m" --argjson r "$reply" \'$m + [$r, {role:"user",content:"And three more?"}]\')',
  "  sleep 1",
  "done",
].join("\n");

const hasCommand = (name: string) => spawnSync("sh", ["-c", `command -v ${name}`]).status === 0;

/** Whether the token-mode, sandboxed scenario can run here. */
function canRunSandboxedTokenMode(): string | null {
  const missing = ["bwrap", "curl", "jq"].filter((c) => !hasCommand(c));
  return missing.length > 0 ? `missing ${missing.join(", ")}` : null;
}

async function tokenModeThroughput(n: number) {
  return withGateway(
    {
      engine: "sglang",
      maxInit: Math.min(n, 200),
      maxRun: n,
      maxPostrun: Math.min(n, 200),
      runtimeSettings: { local: { sandbox: "always", bwrapPath: "bwrap" } },
    },
    async (cp, gateway) => {
      const tasks = Array.from({ length: n }, () => {
        const a = makeAssign({
          prefix: `tm${n}`,
          command: CONVERSATION,
          evaluator: null,
          timeoutSeconds: 600,
        });
        a.session.builder = { strategy: "conversation", config: {} };
        return a;
      });
      const before = process.memoryUsage().rss / 1024 / 1024;
      const run = await drive(cp, tasks, gateway);
      const traces = run.results.map((r) => r.result.trajectory.traces.length);
      // Model calls per session: each turn's sampled ids are one run of 1s in a trace's loss mask.
      const calls = run.results.map((r) =>
        r.result.trajectory.traces.reduce(
          (k, t) => k + t.loss_mask.filter((m, i) => m === 1 && t.loss_mask[i - 1] !== 1).length,
          0,
        ),
      );
      const tokens = run.results.map((r) =>
        r.result.trajectory.traces.reduce((k, t) => k + t.prompt_ids.length + t.response_ids.length, 0),
      );
      return {
        n,
        ...run,
        baseRssMb: before,
        completed: run.results.filter((r) => r.result.status === "COMPLETED").length,
        oneTrace: traces.filter((t) => t === 1).length,
        calls,
        tokens,
      };
    },
    "simulator",
  );
}

async function warmVsCold() {
  const podman = canBuildTestImage();
  const runtime = podman
    ? {
        backend: "docker",
        image: ensureTestImage(),
        kwargs: { shell: "sh" },
        prepare: [
          { type: "exec", command: "mkdir -p /repo && cd /repo && git init -q . && echo ready > README" },
        ],
      }
    : { backend: "local", prepare: [{ type: "exec", command: "git init -q . && echo ready > README" }] };
  return withGateway(
    {
      maxInit: 4,
      maxRun: 2,
      maxPostrun: 4,
      ...(podman ? { runtimeSettings: { docker: PODMAN_SETTINGS } } : {}),
    },
    async (cp, gateway) => {
      const tasks = Array.from({ length: 16 }, () =>
        makeAssign({ prefix: "warm", command: "sleep 0.5", evaluator: null, runtime }),
      );
      const run = await drive(cp, tasks, gateway);
      const init = run.results.map((r) => r.result.timing.init_ms);
      const warm = run.results
        .map(
          (r) =>
            (r.result.trajectory.metadata.gateway_timing as { run_start_ms: number | null }).run_start_ms,
        )
        .filter((x): x is number => typeof x === "number");
      const cold = run.results.map(
        (r) =>
          r.result.timing.init_ms +
          ((r.result.trajectory.metadata.gateway_timing as { run_start_ms: number | null }).run_start_ms ??
            0),
      );
      return {
        backend: podman ? "podman (docker backend)" : "local",
        init,
        warm,
        cold,
        failed: run.results.filter((r) => r.result.error?.kind === "infra").length,
      };
    },
  );
}

/** Session counts to run at (`BENCH_SIZES=10,50` for a quick check). */
/** Parts to run (`BENCH_PARTS=token` for one): sleeping harness, token mode, warm vs cold. */
const PARTS = new Set((process.env.BENCH_PARTS ?? "sleep,token,warm").split(","));
const SIZES = (process.env.BENCH_SIZES ?? "100,1000").split(",").map(Number);

if (PARTS.has("sleep")) {
  const rows: string[][] = [];
  for (const n of SIZES) {
    const r = await throughput(n);
    rows.push([
      `${n}`,
      `${r.seconds.toFixed(2)} s`,
      `${(n / r.seconds).toFixed(1)}`,
      `${r.baseRssMb.toFixed(0)} MB`,
      `${r.peakRssMb.toFixed(0)} MB`,
      `${(((r.peakRssMb - r.baseRssMb) / n) * 1024).toFixed(0)} KB`,
      ms(r.runStartP50),
      r.stages,
      `${r.results.filter((x) => x.result.error?.kind === "infra").length}`,
    ]);
  }
  console.log(
    "\nGateway throughput: N sessions at N concurrent runs, harness `sleep 2` (local runtime, no sandbox)\n",
  );
  const header = [
    "sessions",
    "wall",
    "sessions/s",
    "RSS before",
    "RSS peak",
    "RSS/session",
    "run start p50",
    "init / ready / run / post-run p50",
    "infra errors",
  ];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] ?? 0)).join("  ");
  console.log(line(header));
  for (const r of rows) console.log(line(r));
}

if (PARTS.has("token")) {
  const skipTokenMode = canRunSandboxedTokenMode();
  if (skipTokenMode) {
    console.log(`\nToken mode in bubblewrap sandboxes: skipped (${skipTokenMode})`);
  } else {
    const tokenRows: string[][] = [];
    for (const n of SIZES) {
      const r = await tokenModeThroughput(n);
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      tokenRows.push([
        `${n}`,
        `${r.seconds.toFixed(1)} s`,
        `${r.completed}`,
        `${r.oneTrace}`,
        `${(sum(r.calls) / n).toFixed(2)}`,
        `${(sum(r.tokens) / n).toFixed(0)}`,
        `${r.baseRssMb.toFixed(0)} MB`,
        `${r.peakRssMb.toFixed(0)} MB`,
        `${(((r.peakRssMb - r.baseRssMb) / n) * 1024).toFixed(0)} KB`,
      ]);
    }
    console.log(
      "\nToken mode in bubblewrap sandboxes: N sessions at N concurrent runs, each a three-turn curl + jq conversation through the proxy (simulated engine's /generate, Qwen3 tokenizer, conversation builder)\n",
    );
    const h = [
      "sessions",
      "wall",
      "completed",
      "one trace",
      "calls/session",
      "tokens/trace",
      "RSS before",
      "RSS peak",
      "RSS/session",
    ];
    const wd = h.map((x, i) => Math.max(x.length, ...tokenRows.map((r) => (r[i] ?? "").length)));
    const ln = (cells: string[]) => cells.map((c, i) => c.padStart(wd[i] ?? 0)).join("  ");
    console.log(ln(h));
    for (const r of tokenRows) console.log(ln(r));
  }
}

if (PARTS.has("warm")) {
  const w = await warmVsCold();
  console.log(
    `\nWarm pool vs cold start: 16 sessions, max_run 2, max_init 4, ${w.backend}, prepare = git init\n`,
  );
  console.log(line2(["measure", "p50", "p90", "max"]));
  for (const [name, xs] of [
    ["runtime start + prepare (INIT)", w.init],
    ["READY -> RUN start (warm pool)", w.warm],
    ["cold start (INIT + RUN start)", w.cold],
  ] as const) {
    console.log(line2([name, ms(pct(xs, 50)), ms(pct(xs, 90)), ms(Math.max(...xs))]));
  }
  console.log(`\ninfra errors: ${w.failed}`);
}

function line2(cells: string[]): string {
  return [cells[0]?.padEnd(32), ...cells.slice(1).map((c) => c.padStart(10))].join("  ");
}
