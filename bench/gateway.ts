/**
 * `npm run bench:gateway`: the gateway agent under load, in one process with a fake control plane
 * (a real WebSocket server that assigns as fast as credit allows) and the fixture engine.
 *
 * 1. Throughput and memory: N sessions with a sleeping harness (`sleep 2`, no model call) at
 *    N concurrent runs (max_run = N), N = 100 and 1,000: sessions/s from first assign to last
 *    result, and the gateway process's peak RSS (its child processes not included).
 * 2. The warm pool's point: time from a run slot's grant to the harness's first command (READY →
 *    RUN start) versus a cold start (runtime start + prepare, then the same), with a container
 *    runtime (podman) when installed, else the local runtime with a `git init` prepare step.
 *
 * Prints a table; asserts nothing.
 *
 * @module
 */
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

const TOKEN = "bench-token";
const MODEL = "Qwen/Qwen3-8B";
const quiet = { info() {}, warn() {}, error() {} };

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
  void gateway;
  return { results, seconds: (performance.now() - started) / 1000, peakRssMb: peak / 1024 / 1024 };
}

async function withGateway<T>(
  opts: Partial<Parameters<typeof startGateway>[0]>,
  fn: (cp: FakeControlPlane, gateway: Gateway) => Promise<T>,
): Promise<T> {
  const engine = await startFixtureEngine({ model: MODEL });
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
      return { n, ...run, baseRssMb: before, runStartP50: pct(runStarts, 50) };
    },
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

const rows: string[][] = [];
for (const n of [100, 1000]) {
  const r = await throughput(n);
  rows.push([
    `${n}`,
    `${r.seconds.toFixed(2)} s`,
    `${(n / r.seconds).toFixed(1)}`,
    `${r.baseRssMb.toFixed(0)} MB`,
    `${r.peakRssMb.toFixed(0)} MB`,
    `${(((r.peakRssMb - r.baseRssMb) / n) * 1024).toFixed(0)} KB`,
    ms(r.runStartP50),
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
  "infra errors",
];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] ?? 0)).join("  ");
console.log(line(header));
for (const r of rows) console.log(line(r));

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

function line2(cells: string[]): string {
  return [cells[0]?.padEnd(32), ...cells.slice(1).map((c) => c.padStart(10))].join("  ");
}
