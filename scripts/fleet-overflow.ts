/**
 * A batch larger than the fleet, end to end: `wrangler dev`, the simulated engine and two real
 * gateway agents (`polar serve_gateway`, shell harness), each its own process. Submits more short
 * sessions than the two gateways hold at once, SIGKILLs one gateway after its first few results,
 * and waits until every session has ended. The surviving gateway works through the whole tail, so
 * most sessions wait in the queue far longer than their `timeout_seconds`; with the run budget
 * counted from INITIALIZING every one of them still completes.
 *
 * Run as a script it prints the figures (`tsx scripts/fleet-overflow.ts --sessions 400`); the
 * end-to-end test `test/e2e/fleet-overflow.test.ts` runs it at a smaller scale and asserts.
 *
 * @module
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { ControlPlaneClient } from "../cli/client";
import type { RoleTokens } from "../cli/dev-tokens";
import { freePort } from "../cli/ports";
import { type PolarProcess, spawnPolar, waitForProcessHttp } from "../cli/processes";
import { startControlPlaneDev } from "../cli/wrangler-dev";
import type { SessionResult, TaskSpecInput } from "../protocol";

/** Shape of one run. */
export interface FleetOverflowOptions {
  /** Sessions in the batch (tasks of 4 samples each, the last one smaller). */
  sessions: number;
  /** `timeout_seconds` of every task: the run budget, far below the time the tail waits. */
  timeoutSeconds: number;
  /** Seconds each session's shell command sleeps. */
  sleepSeconds: number;
  /** RUN (and INIT, POST_RUN) workers per gateway. */
  slotsPerGateway: number;
  /** The second gateway is SIGKILLed once this many results were accepted. */
  killAfterResults: number;
  /**
   * `POLAR_DEADLINE_GRACE_SECONDS` and `POLAR_LEASE_GRACE_SECONDS` of the control plane; undefined
   * keeps their defaults (120 s and 60 s).
   */
  graceSeconds?: number;
  /** Give up waiting for the batch after this long. */
  maxWaitSeconds: number;
  /** Progress lines on stdout. */
  log?: (line: string) => void;
}

/** What a run measured. */
export interface FleetOverflowFigures {
  sessions: number;
  /** Count per `status` (`TIMEOUT/queue` etc. for timeouts, by `metadata.timeout_source`). */
  outcomes: Record<string, number>;
  /** Distinct `error.message`s of non-COMPLETED results (at most 5) with their counts. */
  errors: Record<string, number>;
  /** Sessions whose result came from a second or later attempt (requeued after the kill). */
  retried: number;
  /** `timing.queued_ms` of every result: median and maximum, in seconds. */
  queuedSecondsP50: number;
  queuedSecondsMax: number;
  /** Sessions that waited in the queue longer than `timeout_seconds` and still COMPLETED. */
  completedAfterLongWait: number;
  /** Seconds from submit until the batch was done. */
  wallSeconds: number;
  /** Whether the batch finished within `maxWaitSeconds`. */
  finished: boolean;
}

const DEFAULTS: FleetOverflowOptions = {
  sessions: 400,
  timeoutSeconds: 120,
  sleepSeconds: 1,
  slotsPerGateway: 4,
  killAfterResults: 8,
  maxWaitSeconds: 1800,
};

function outcomeOf(result: SessionResult): string {
  if (result.status !== "TIMEOUT") return result.status;
  const source = (result.metadata as { timeout_source?: unknown }).timeout_source;
  return `TIMEOUT/${typeof source === "string" ? source : "?"}`;
}

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function allResults(client: ControlPlaneClient, batchId: string): Promise<SessionResult[]> {
  const out: SessionResult[] = [];
  let after = 0;
  for (;;) {
    const page = await client.results(batchId, after);
    out.push(...page.results.map((r) => r.result));
    after = page.next;
    if (page.results.length === 0) return out;
  }
}

/**
 * Runs the scenario once and returns its figures; every process it started is stopped.
 *
 * @example
 * ```ts
 * const figures = await runFleetOverflow({ sessions: 60, timeoutSeconds: 5 });
 * console.log(figures.outcomes); // { COMPLETED: 60 }
 * ```
 */
export async function runFleetOverflow(
  partial: Partial<FleetOverflowOptions> = {},
): Promise<FleetOverflowFigures> {
  const opts = { ...DEFAULTS, ...partial };
  const log = opts.log ?? (() => {});
  const root = mkdtempSync(join(tmpdir(), "polar-overflow-"));
  const tokens: RoleTokens = {
    trainer: `trainer-${randomBytes(12).toString("hex")}`,
    gateway: `gateway-${randomBytes(12).toString("hex")}`,
    admin: `admin-${randomBytes(12).toString("hex")}`,
  };
  const started: { stop(): Promise<void> }[] = [];
  try {
    const enginePort = await freePort();
    const engine = spawnPolar("sim-engine", ["sim-engine", "--port", String(enginePort)]);
    started.push(engine);
    const grace = String(opts.graceSeconds);
    const vars: Record<string, string> =
      opts.graceSeconds === undefined
        ? {}
        : { POLAR_DEADLINE_GRACE_SECONDS: grace, POLAR_LEASE_GRACE_SECONDS: grace };
    const [cp] = await Promise.all([
      startControlPlaneDev({
        persistTo: join(root, "state"),
        tokens,
        vars,
      }),
      waitForProcessHttp(engine, `http://127.0.0.1:${enginePort}/health`),
    ]);
    started.push(cp);
    const slots = String(opts.slotsPerGateway);
    const gateways: PolarProcess[] = ["node-a", "node-b"].map((nodeId) => {
      const gw = spawnPolar(
        `gateway ${nodeId}`,
        [
          "serve_gateway",
          "--control-plane",
          cp.url,
          "--node-id",
          nodeId,
          "--engine-url",
          `http://127.0.0.1:${enginePort}`,
          "--model",
          "Qwen/Qwen3-0.6B",
          "--max-init",
          slots,
          "--max-run",
          slots,
          "--max-postrun",
          slots,
          "--work-root",
          join(root, "work", nodeId),
        ],
        { POLAR_GATEWAY_TOKEN: tokens.gateway },
      );
      started.push(gw);
      return gw;
    });
    const client = new ControlPlaneClient(cp.url, tokens.trainer);
    // Both gateways must be serving before the batch goes in, so the kill hits a busy gateway.
    const ready = Date.now() + 60_000;
    for (;;) {
      const res = await fetch(`${cp.url}/v1/gateways`, {
        headers: { Authorization: `Bearer ${tokens.trainer}` },
      });
      const body = (await res.json()) as { gateways?: { connected: boolean }[] };
      if ((body.gateways ?? []).filter((g) => g.connected).length >= 2) break;
      if (Date.now() > ready || gateways.some((g) => !g.alive())) {
        throw new Error(`gateways did not connect:\n${gateways.map((g) => g.output()).join("\n")}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    const tasks: TaskSpecInput[] = [];
    for (let left = opts.sessions, i = 0; left > 0; i++, left -= 4) {
      tasks.push({
        task_id: `t${i}`,
        instruction: `What is ${i} + 1?`,
        num_samples: Math.min(4, left),
        timeout_seconds: opts.timeoutSeconds,
        max_attempts: 3,
        // The hello example's client: one model call through the proxy, so each session has a trace.
        runtime: {
          backend: "local",
          prepare: [{ type: "upload_file", source: "examples/hello/ask.mjs", target: "ask.mjs" }],
        },
        agent: {
          harness: "shell",
          custom_shell: { command: `sleep ${opts.sleepSeconds} && node ask.mjs {{INSTRUCTION}}` },
        },
        evaluator: { strategy: "session_completed" },
      });
    }
    const t0 = Date.now();
    const created = await client.submit({ tasks });
    log(`submitted ${created.sessions} sessions as ${created.batch_id} to 2 gateways × ${slots} slots`);
    let killed = false;
    let finished = false;
    let lastLine = 0;
    while (Date.now() - t0 < opts.maxWaitSeconds * 1000) {
      const status = await client.status(created.batch_id);
      const ended = status.completed_sessions;
      if (!killed && ended >= opts.killAfterResults) {
        await gateways[1]!.kill();
        killed = true;
        log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] SIGKILLed node-b after ${ended} results`);
      }
      if (status.status === "completed") {
        finished = true;
        break;
      }
      if (Date.now() - lastLine > 10_000) {
        lastLine = Date.now();
        log(
          `[${((Date.now() - t0) / 1000).toFixed(1)}s] ${ended}/${status.sessions} ended ${JSON.stringify(status.counts)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    const wallSeconds = (Date.now() - t0) / 1000;
    const results = await allResults(client, created.batch_id);
    const outcomes: Record<string, number> = {};
    for (const r of results) outcomes[outcomeOf(r)] = (outcomes[outcomeOf(r)] ?? 0) + 1;
    const errors: Record<string, number> = {};
    for (const r of results) {
      const message = r.error?.message.slice(0, 160);
      if (message === undefined) continue;
      if (message in errors || Object.keys(errors).length < 5) errors[message] = (errors[message] ?? 0) + 1;
    }
    const queued = results.map((r) => r.timing.queued_ms / 1000);
    return {
      sessions: created.sessions,
      outcomes,
      errors,
      retried: results.filter((r) => r.attempt > 1).length,
      queuedSecondsP50: median(queued),
      queuedSecondsMax: queued.length > 0 ? Math.max(...queued) : 0,
      completedAfterLongWait: results.filter(
        (r) => r.status === "COMPLETED" && r.timing.queued_ms > opts.timeoutSeconds * 1000,
      ).length,
      wallSeconds,
      finished,
    };
  } finally {
    await Promise.allSettled(started.reverse().map((p) => p.stop()));
    rmSync(root, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      sessions: { type: "string" },
      "timeout-seconds": { type: "string" },
      "sleep-seconds": { type: "string" },
      slots: { type: "string" },
      "kill-after": { type: "string" },
      grace: { type: "string" },
    },
  });
  const num = (v: string | undefined, fallback: number) => (v === undefined ? fallback : Number(v));
  const figures = await runFleetOverflow({
    sessions: num(values.sessions, DEFAULTS.sessions),
    timeoutSeconds: num(values["timeout-seconds"], DEFAULTS.timeoutSeconds),
    sleepSeconds: num(values["sleep-seconds"], DEFAULTS.sleepSeconds),
    slotsPerGateway: num(values.slots, DEFAULTS.slotsPerGateway),
    killAfterResults: num(values["kill-after"], DEFAULTS.killAfterResults),
    ...(values.grace === undefined ? {} : { graceSeconds: Number(values.grace) }),
    log: (line) => console.log(line),
  });
  console.log(JSON.stringify(figures, null, 2));
  process.exit(figures.finished ? 0 : 1);
}
