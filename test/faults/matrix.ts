/**
 * The fault matrix: a workload of sessions (each sleeps a seeded 1–20 s around 1–3 model calls,
 * `agent.mjs`) over several gateway processes and the simulated engine, with the control plane
 * under `wrangler dev --persist-to`, while faults are injected: gateways SIGKILLed mid-run and
 * between sending a result and its acknowledgement, the control plane SIGKILLed mid-batch and
 * right after a shard lent sessions to another, bursts of engine 503s (shorter and longer than the
 * proxy's retry budget) and stalls, a flaky link, a gateway whose clock runs minutes ahead, the
 * fence raised and lowered, harnesses that hang, runtimes that fail to start. Then every session's
 * one result is checked (`checks.ts`). `npm run test:faults` runs it at scale, the test file a
 * short variant.
 *
 * @module
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ControlPlaneClient } from "../../cli/client";
import type { SessionResult, TaskSpecInput } from "../../protocol";
import { checkResults, type ExpectedTask, type MatrixReport } from "./checks";
import { AGENT_PATH, FaultStack } from "./stack";

/** How many times each fault is injected over a run (0: never). */
export interface FaultPlan {
  gatewayKillMidRun: number;
  /** SIGKILL of the flaky gateway while its link delays every frame (results sent, acks not yet back). */
  gatewayKillBeforeAck: number;
  controlPlaneKill: number;
  /** SIGKILL of the control plane right after a shard lent sessions to a sibling. */
  controlPlaneKillDuringLoan: number;
  /** 503 bursts shorter than the proxy's retry budget: no harness sees them. */
  engineErrorBursts: number;
  /** 503s for longer than the retry budget: the sessions that meet it are infra failures, run again. */
  engineOutages: number;
  engineStalls: number;
  /** Cycles of latency, blackhole and reset on the flaky gateway's link. */
  flakyLinkCycles: number;
  fenceCycles: number;
}

/** Options of {@link runFaultMatrix}. */
export interface MatrixOptions {
  /** Sessions to run (rounded up to whole batches). */
  sessions: number;
  gateways: number;
  maxRun: number;
  seed: number;
  faults: FaultPlan;
  /** Share of tasks whose harness hangs (their sessions end TIMEOUT). */
  hangShare: number;
  /** Share of tasks whose runtime fails to start half of the time (infra; run again). */
  flakyRuntimeShare: number;
  /** Longest a session works (seconds; each draws 1 s to this). Default 20. */
  workSeconds?: number;
  /** The proxy's engine retry budget (seconds). */
  engineRetrySeconds: number;
  /** Give up waiting for the results after this long (ms). */
  timeoutMs: number;
  log: (line: string) => void;
}

/** The queue every batch of the fault tests goes to. */
export const QUEUE = "faults";
const SAMPLES = 5;
const TASKS_PER_BATCH = 10;
/** Run budget of a session: the agent works at most 20 s, plus engine waits and retries. */
const SESSION_TIMEOUT_SECONDS = 150;
/** A hanging harness is cut after this. */
const HANG_TIMEOUT_SECONDS = 20;

/** A seeded uniform draw in [0, 1). */
function rng(seed: number): () => number {
  let h = seed >>> 0 || 1;
  return () => {
    h = (h + 0x6d2b79f5) >>> 0;
    let t = h;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The batches of the workload (numbered from `firstBatch`), with what each task is expected to end
 * as.
 */
export function workload(
  opts: Pick<MatrixOptions, "sessions" | "seed" | "hangShare" | "flakyRuntimeShare" | "workSeconds">,
  firstBatch = 0,
): { batches: Array<{ batch_id: string; tasks: TaskSpecInput[] }>; expected: ExpectedTask[] } {
  const draw = rng(opts.seed + firstBatch);
  const batches: Array<{ batch_id: string; tasks: TaskSpecInput[] }> = [];
  const expected: ExpectedTask[] = [];
  const nBatches = Math.ceil(opts.sessions / (SAMPLES * TASKS_PER_BATCH));
  for (let b = firstBatch; b < firstBatch + nBatches; b++) {
    const batchId = `fm-${opts.seed}-${b}`;
    const tasks: TaskSpecInput[] = [];
    for (let t = 0; t < TASKS_PER_BATCH; t++) {
      const u = draw();
      const kind: ExpectedTask["kind"] =
        u < opts.hangShare
          ? "hang"
          : u < opts.hangShare + opts.flakyRuntimeShare
            ? "flaky_runtime"
            : "normal";
      const taskId = `t${t}`;
      tasks.push({
        task_id: taskId,
        instruction: `fault matrix session (${kind})`,
        num_samples: SAMPLES,
        timeout_seconds: kind === "hang" ? HANG_TIMEOUT_SECONDS : SESSION_TIMEOUT_SECONDS,
        max_attempts: 3,
        runtime: {
          backend: "local",
          prepare: [
            { type: "upload_file", source: AGENT_PATH, target: "../harness/agent.mjs" },
            // Fails about half of the time: a runtime that does not come up (infra, run again).
            ...(kind === "flaky_runtime"
              ? [{ type: "exec" as const, command: "test $(od -An -N1 -tu1 /dev/urandom) -lt 128" }]
              : []),
          ],
        },
        agent: {
          harness: "shell",
          custom_shell: {
            command: `node ../harness/agent.mjs --seed ${opts.seed} --max-seconds ${opts.workSeconds ?? 20}${kind === "hang" ? " --hang" : ""}`,
          },
        },
        evaluator: { strategy: "session_completed" },
      });
      expected.push({ batchId, taskIndex: t, kind, samples: SAMPLES });
    }
    batches.push({ batch_id: batchId, tasks });
  }
  return { batches, expected };
}

/** The faults, each at a random moment of the run's first `spanMs`. */
function schedule(
  plan: FaultPlan,
  spanMs: number,
  seed: number,
): Array<{ at: number; kind: keyof FaultPlan }> {
  const draw = rng(seed ^ 0x5eed);
  const out: Array<{ at: number; kind: keyof FaultPlan }> = [];
  for (const [kind, n] of Object.entries(plan) as Array<[keyof FaultPlan, number]>)
    for (let i = 0; i < n; i++) out.push({ at: 5_000 + draw() * spanMs, kind });
  return out.sort((a, b) => a.at - b.at);
}

/** Counters of the control plane's shards (`GET /metrics`), summed over shards. */
export async function queueCounters(url: string, token: string): Promise<Record<string, number>> {
  const res = await fetch(`${url}/metrics`, {
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(10_000),
  });
  const out: Record<string, number> = {};
  if (!res.ok) return out;
  for (const line of (await res.text()).split("\n")) {
    const m = /^polar_queue_([a-z_]+)_total\{[^}]*queue="faults"[^}]*\} (\d+(?:\.\d+)?)$/.exec(line);
    if (m) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
  }
  return out;
}

/**
 * Runs the matrix and returns its report (throws only when the stack cannot start or the results
 * never all arrive; broken invariants are in `report.violations`).
 *
 * @example
 * ```ts
 * const report = await runFaultMatrix({ sessions: 2000, gateways: 4, maxRun: 32, … });
 * report.violations; // []
 * ```
 */
export async function runFaultMatrix(opts: MatrixOptions): Promise<MatrixReport> {
  const root = mkdtempSync(join(tmpdir(), "polar-faults-"));
  const flaky = opts.gateways - 1;
  const skewed = opts.gateways > 2 ? opts.gateways - 2 : null;
  const stack = await FaultStack.start({
    root,
    gateways: opts.gateways,
    maxRun: opts.maxRun,
    queue: QUEUE,
    shards: 2,
    flaky,
    skewed,
    skewMinutes: 5,
    engineRetrySeconds: opts.engineRetrySeconds,
    // Short liveness and grace: a killed gateway's sessions go back to the queue in seconds.
    vars: { POLAR_LEASE_GRACE_SECONDS: "10", POLAR_PING_INTERVAL_SECONDS: "3" },
  });
  const injected: Record<string, number> = {};
  const note = (kind: string) => {
    injected[kind] = (injected[kind] ?? 0) + 1;
  };
  try {
    const client = new ControlPlaneClient(stack.url, stack.tokens.trainer);
    const { batches, expected } = workload(opts);
    const submittedAt = new Map<string, number>();
    for (const batch of batches) {
      await submitOnce(client, batch);
      submittedAt.set(batch.batch_id, Date.now());
    }
    const sessions = expected.reduce((n, t) => n + t.samples, 0);
    opts.log(`submitted ${sessions} sessions in ${batches.length} batches`);
    const started = Date.now();
    // The workload's duration on a fleet that never fails (a session works (1 + max) / 2 s on average).
    const meanSeconds = (1 + (opts.workSeconds ?? 20)) / 2;
    const spanMs = Math.max(20_000, ((sessions * meanSeconds) / (opts.gateways * opts.maxRun)) * 1000 * 0.8);
    const plan = schedule(opts.faults, spanMs, opts.seed);
    const injector = new FaultInjector(stack, client, opts.engineRetrySeconds);
    const inject = async (planned: keyof FaultPlan) => note(await injector.inject(planned));
    // Faults of one kind run one after the other; kinds overlap, as faults do.
    const byKind = new Map<keyof FaultPlan, Array<{ at: number }>>();
    for (const f of plan) byKind.set(f.kind, [...(byKind.get(f.kind) ?? []), f]);
    const injecting = Promise.all(
      [...byKind.entries()].map(async ([kind, times]) => {
        for (const { at } of times) {
          const wait = started + at - Date.now();
          if (wait > 0) await sleep(wait);
          opts.log(`+${((Date.now() - started) / 1000).toFixed(0)} s: ${kind}`);
          await inject(kind).catch((err: unknown) => opts.log(`fault ${kind} failed: ${String(err)}`));
        }
      }),
    );
    await injecting;
    return await drainAndCheck(stack, client, {
      batchIds: batches.map((b) => b.batch_id),
      submittedAt,
      deadline: started + opts.timeoutMs,
      expected,
      seed: opts.seed,
      injected,
      started,
      log: opts.log,
    });
  } finally {
    await stack.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

/**
 * Injects one fault of the matrix at a time into a running {@link FaultStack}: kills and restarts
 * gateways and the control plane, sets the simulated engine's fault knobs, flaps the flaky
 * gateway's link, cycles the fence. Shared by the matrix and the soak.
 *
 * @example
 * ```ts
 * const injector = new FaultInjector(stack, client, 30);
 * await injector.inject("controlPlaneKill"); // "controlPlaneKill"
 * ```
 */
export class FaultInjector {
  private policyVersion = 0;
  private readonly flaky: number;

  constructor(
    private readonly stack: FaultStack,
    private readonly client: ControlPlaneClient,
    private readonly engineRetrySeconds: number,
  ) {
    this.flaky = stack.opts.flaky ?? stack.opts.gateways - 1;
  }

  /** Injects `planned` and resolves with the kind that was injected (a loan kill without a loan is a plain one). */
  async inject(planned: keyof FaultPlan): Promise<keyof FaultPlan> {
    let kind = planned;
    const draw = Math.random;
    switch (kind) {
      case "gatewayKillMidRun": {
        const i = Math.floor(draw() * Math.max(1, this.stack.opts.gateways - 1));
        await this.stack.killGateway(i);
        await sleep(1_000 + draw() * 4_000);
        this.stack.startGateway(i);
        break;
      }
      case "gatewayKillBeforeAck": {
        this.stack.proxy?.set({ kind: "latency", ms: 1_500 });
        await sleep(6_000);
        await this.stack.killGateway(this.flaky);
        this.stack.proxy?.set({ kind: "pass" });
        await sleep(2_000);
        this.stack.startGateway(this.flaky);
        break;
      }
      case "controlPlaneKill": {
        await this.stack.killControlPlane();
        await sleep(2_000);
        await this.stack.startControlPlane();
        break;
      }
      case "controlPlaneKillDuringLoan": {
        // Waits (at most 30 s) for a shard to lend sessions, then kills at once; a kill that saw
        // no loan is counted as a plain one.
        const before = (await queueCounters(this.stack.url, this.stack.tokens.viewer).catch(
          () => ({}),
        )) as Record<string, number>;
        const until = Date.now() + 30_000;
        let lent = false;
        while (Date.now() < until && !lent) {
          const now = await queueCounters(this.stack.url, this.stack.tokens.viewer).catch(() => before);
          lent = (now.lent_sessions ?? 0) > (before.lent_sessions ?? 0);
          if (!lent) await sleep(100);
        }
        await this.stack.killControlPlane();
        if (!lent) kind = "controlPlaneKill";
        await sleep(2_000);
        await this.stack.startControlPlane();
        break;
      }
      case "engineErrorBursts":
        await setEngineFaults(this.stack.engineUrl, { error_rate: 1 });
        await sleep(Math.min(3_000, (this.engineRetrySeconds * 1000) / 3));
        await setEngineFaults(this.stack.engineUrl, { error_rate: 0 });
        break;
      case "engineOutages":
        await setEngineFaults(this.stack.engineUrl, { error_rate: 1 });
        await sleep(this.engineRetrySeconds * 1000 + 5_000);
        await setEngineFaults(this.stack.engineUrl, { error_rate: 0 });
        break;
      case "engineStalls":
        await setEngineFaults(this.stack.engineUrl, { stall_rate: 0.5, stall_ms: 4_000 });
        await sleep(10_000);
        await setEngineFaults(this.stack.engineUrl, { stall_rate: 0 });
        break;
      case "flakyLinkCycles":
        this.stack.proxy?.set({ kind: "latency", ms: 300 });
        await sleep(5_000);
        this.stack.proxy?.set({ kind: "blackhole" });
        await sleep(6_000);
        this.stack.proxy?.set({ kind: "reset" });
        await sleep(3_000);
        this.stack.proxy?.set({ kind: "pass" });
        break;
      case "fenceCycles": {
        const mode = draw() < 0.5 ? "drain" : "abort";
        await this.client.pause(QUEUE, { mode, timeout_seconds: 20 }).catch(() => undefined);
        await sleep(1_500);
        this.policyVersion++;
        // A trainer resumes until it is acknowledged: a resume lost to a control-plane restart
        // left the queue paused and every session waiting out its budget.
        for (let tries = 0; ; tries++) {
          const resumed = await this.client.resume(QUEUE, String(this.policyVersion)).then(
            () => true,
            () => false,
          );
          if (resumed || tries >= 60) break;
          await sleep(1_000);
        }
        break;
      }
    }
    return kind;
  }
}

/**
 * The end of a fault run: the engine healthy and every gateway connected again, every batch's
 * results read (through restarts), then each session checked (`checks.ts`).
 *
 * @example
 * ```ts
 * const report = await drainAndCheck(stack, client, { batchIds, submittedAt, deadline, … });
 * ```
 */
export async function drainAndCheck(
  stack: FaultStack,
  client: ControlPlaneClient,
  run: {
    batchIds: string[];
    submittedAt: Map<string, number>;
    deadline: number;
    expected: ExpectedTask[];
    seed: number;
    injected: Record<string, number>;
    started: number;
    log: (line: string) => void;
  },
): Promise<MatrixReport> {
  await setEngineFaults(stack.engineUrl, { error_rate: 0, stall_rate: 0 });
  await stack.waitConnected(stack.opts.gateways, 120_000);
  const results = await collect(client, run.batchIds, run.submittedAt, run.deadline, run.log);
  const counters = await settledCounters(stack.url, stack.tokens.viewer);
  return checkResults({
    expected: run.expected,
    results: results.map((r) => r.result),
    latencies: results.map((r) => r.latencyMs),
    seed: run.seed,
    injected: run.injected,
    counters,
    wallMs: Date.now() - run.started,
    gatewayStarts: stack.gatewayStarts(),
    controlPlaneStarts: stack.controlPlaneStarts,
  });
}

/**
 * Submits a batch, again after an answer that may not have stored it (wrangler dev answers 503
 * "Your worker restarted mid-request" under load; the connection may drop): a repeat of the same
 * body under the same batch id is answered with the stored batch, so it is safe.
 */
export async function submitOnce(
  client: ControlPlaneClient,
  batch: { batch_id: string; tasks: TaskSpecInput[] },
): Promise<void> {
  for (let tries = 1; ; tries++) {
    try {
      await client.submit({ ...batch, queue: QUEUE });
      return;
    } catch (error) {
      const status = (error as { status?: number }).status;
      if ((status !== undefined && status < 500) || tries >= 10) throw error;
      await sleep(2_000);
    }
  }
}

/**
 * The counters once the control plane answers them (a Durable Object just restarted may not be
 * ready for the first `/metrics`): up to 10 tries a second apart, else none.
 */
export async function settledCounters(url: string, token: string): Promise<Record<string, number>> {
  for (let i = 0; i < 10; i++) {
    const counters = await queueCounters(url, token).catch(() => ({}) as Record<string, number>);
    if (Object.keys(counters).length > 0) return counters;
    await sleep(1_000);
  }
  return {};
}

export async function setEngineFaults(url: string, faults: Record<string, number>): Promise<void> {
  await fetch(`${url}/sim/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(faults),
    signal: AbortSignal.timeout(5_000),
  });
}

/**
 * Reads every batch's results by cursor until each batch is done, retrying through control-plane
 * restarts; each result with the time from its batch's submission to when it was read.
 */
export async function collect(
  client: ControlPlaneClient,
  batchIds: string[],
  submittedAt: Map<string, number>,
  deadline: number,
  log: (line: string) => void,
): Promise<Array<{ result: SessionResult; latencyMs: number }>> {
  const out: Array<{ result: SessionResult; latencyMs: number }> = [];
  const cursors = new Map(batchIds.map((id) => [id, 0]));
  const open = new Set(batchIds);
  while (open.size > 0) {
    if (Date.now() > deadline)
      throw new Error(`results still missing for ${open.size} batches at the deadline`);
    for (const id of [...open]) {
      try {
        const page = await client.results(id, cursors.get(id)!, 0);
        const now = Date.now();
        for (const r of page.results) out.push({ result: r.result, latencyMs: now - submittedAt.get(id)! });
        cursors.set(id, page.next);
        if (page.done) open.delete(id);
      } catch {
        // The control plane is restarting: read again on the next round.
      }
    }
    log(`${out.length} results read, ${open.size} batches open`);
    if (open.size > 0) await sleep(2_000);
  }
  return out;
}
