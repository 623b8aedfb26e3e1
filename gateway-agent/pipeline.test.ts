import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type ProgressMessage, ResultMessage, WIRE_VERSION } from "../protocol";
import { type FixtureEngine, startFixtureEngine } from "../proxy/testing/fixture-engine";
import { describeWith } from "../test/support/optional-tools";
import { type Gateway, type GatewayOptions, startGateway } from "./gateway";
import {
  type FakeControlPlane,
  type FakeControlPlaneOptions,
  startFakeControlPlane,
} from "./testing/fake-control-plane";
import { ASK, ASK_SCRIPT, isResultOf, makeAssign } from "./testing/session-fixtures";

const TOKEN = "test-gateway-token";
const MODEL = "Qwen/Qwen3-8B";
const quiet = { info() {}, warn() {}, error() {} };
const SLOW_EVALUATOR = `${path.join(import.meta.dirname, "testing", "modules", "slow-evaluator.mjs")}:evaluate`;

let engine: FixtureEngine;
let cp: FakeControlPlane | null = null;
let gateway: Gateway | null = null;
let scratch: string | null = null;

beforeAll(async () => {
  engine = await startFixtureEngine({ model: MODEL });
});
afterAll(async () => {
  await engine.close();
});
afterEach(async () => {
  await gateway?.stop();
  gateway = null;
  await cp?.close();
  cp = null;
  if (scratch) await rm(scratch, { recursive: true, force: true });
  scratch = null;
});

async function start(extra: Partial<GatewayOptions> = {}, cpOpts: Partial<FakeControlPlaneOptions> = {}) {
  cp = await startFakeControlPlane({ token: TOKEN, ...cpOpts });
  scratch = await mkdtemp(path.join(tmpdir(), "polar-pipe-test-"));
  gateway = await startGateway({
    controlPlaneUrl: cp.url,
    nodeId: "gpu-node-1",
    token: TOKEN,
    engine: "sglang-openai",
    engineUrl: engine.url,
    model: MODEL,
    workRoot: path.join(scratch, "work"),
    reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
    uploadPolicy: { initialDelayMs: 10, maxDelayMs: 50, concurrency: 4 },
    logger: quiet,
    runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
    ...extra,
  });
  await cp.waitFor((m) => m.type === "hello");
  return { cp, gateway };
}

const progressOf = (c: FakeControlPlane, leaseId: string) =>
  c.received
    .map((r) => r.message)
    .filter((m): m is ProgressMessage => m.type === "progress" && m.lease_id === leaseId)
    .map((m) => m.status);

describe("staged pipeline", { timeout: 60_000 }, () => {
  it("keeps READY within max_run and grades in POST_RUN without holding a RUN slot", async () => {
    const { cp, gateway } = await start({ maxInit: 4, maxRun: 1, maxPostrun: 1 });
    const assigns = [0, 1, 2, 3, 4].map(() =>
      makeAssign({
        command: `sleep 0.3; ${ASK}`,
        evaluator: { strategy: SLOW_EVALUATOR, config: { delay_ms: 1200 } },
      }),
    );
    let maxReady = 0;
    let runWhileGrading = 0;
    const watch = setInterval(() => {
      const m = gateway.stats().metrics;
      maxReady = Math.max(maxReady, m.ready_depth);
      if (m.run_inflight >= 1 && m.postrun_inflight >= 1) runWhileGrading++;
    }, 5);
    try {
      for (const a of assigns) cp.send(a);
      for (const a of assigns) {
        // Five sessions through one RUN slot and 1.2 s of grading each: generous on a loaded machine.
        const { result } = await cp.waitFor(isResultOf(a.lease_id), 45_000);
        expect(result.status).toBe("COMPLETED");
        expect(result.reward).toBe(0.5);
        expect(result.trajectory.traces[0]?.reward).toBe(0.5);
        expect(result.trajectory.metadata.evaluation).toMatchObject({
          strategy: SLOW_EVALUATOR,
          waited_ms: 1200,
        });
      }
    } finally {
      clearInterval(watch);
    }
    expect(maxReady).toBe(1); // the warm buffer filled, and never beyond its target
    expect(runWhileGrading).toBeGreaterThan(0); // a harness ran while another session was graded
    // Every progress report carried the stage metrics: 4 stages reported by each of the 5 sessions.
    const reports = cp.received.filter((r) => r.message.type === "progress");
    expect(reports).toHaveLength(4 * assigns.length);
    expect(reports.every((r) => r.message.type === "progress" && r.message.metrics !== undefined)).toBe(true);
  });

  it("serves higher dispatch_priority first among sessions queued for INIT", async () => {
    const { cp } = await start({ maxInit: 1, maxRun: 2, maxPostrun: 1 });
    const blocker = makeAssign({
      command: "true",
      evaluator: null,
      runtime: { prepare: [{ type: "exec", command: "sleep 0.5" }] },
    });
    const low = makeAssign({ command: "true", evaluator: null, priority: 0 });
    const high = makeAssign({ command: "true", evaluator: null, priority: 90 });
    cp.send(blocker);
    await cp.waitFor(
      (m) => m.type === "progress" && m.lease_id === blocker.lease_id && m.status === "INITIALIZING",
    );
    cp.send(low);
    cp.send(high);
    for (const a of [blocker, low, high]) await cp.waitFor(isResultOf(a.lease_id));
    const inits = cp.received
      .map((r) => r.message)
      .filter((m): m is ProgressMessage => m.type === "progress" && m.status === "INITIALIZING")
      .map((m) => m.lease_id);
    expect(inits).toEqual([blocker.lease_id, high.lease_id, low.lease_id]);
  });

  it("agent_timeout: kills the harness, keeps and grades the partial trajectory, classifies the timeout", async () => {
    const { cp } = await start();
    // 3 s: time for the harness's one call (a node start) on a loaded machine, well before the
    // 30 s sleep the timeout cuts short.
    const a = makeAssign({ command: `${ASK}; sleep 30`, metadata: { agent_timeout: 3 } });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result.status).toBe("TIMEOUT");
    expect(result.error).toMatchObject({
      kind: "timeout",
      message: expect.stringContaining("agent_timeout"),
    });
    expect(result.trajectory.status).toBe("TIMEOUT");
    expect(result.trajectory.traces).toHaveLength(1); // the call made before the timeout
    expect(result.trajectory.metadata).toMatchObject({ timeout_source: "agent", timeout_stage: "exec" });
    expect(result.trajectory.metadata.evaluation).toMatchObject({
      strategy: "session_completed",
      outcome_reward: 0,
    });
    expect(result.reward).toBe(0);
  });

  it("session budget from INIT: a prepare step that overruns ends as TIMEOUT in stage init, not graded", async () => {
    const { cp } = await start();
    const a = makeAssign({
      command: ASK,
      timeoutSeconds: 1,
      runtime: { prepare: [{ type: "exec", command: "sleep 30" }] },
    });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result.status).toBe("TIMEOUT");
    expect(result.trajectory.metadata).toMatchObject({ timeout_source: "session", timeout_stage: "init" });
    expect(progressOf(cp, a.lease_id)).toEqual(["INITIALIZING", "POST_RUN"]);
    // The harness never ran: nothing of the agent's to score (a 0 would score the host).
    expect(result.reward).toBeNull();
    expect(result.trajectory.metadata.evaluation).toBeUndefined();
  });

  it("waiting in READY for a RUN slot spends none of the budget; the budget counts again once the session runs", async () => {
    const { cp } = await start({ maxRun: 1 });
    const blocker = makeAssign({ command: `${ASK}; sleep 10` });
    cp.send(blocker);
    await cp.waitFor(
      (m) => m.type === "progress" && m.lease_id === blocker.lease_id && m.status === "RUNNING",
    );
    // A 5 s budget (time for one model call on a loaded machine) behind a RUN slot that stays
    // busy for about 10 s more.
    const waiting = makeAssign({ command: ASK, timeoutSeconds: 5 });
    cp.send(waiting);
    // And one whose own run overruns its budget after the same wait.
    const overrun = makeAssign({ command: `${ASK}; sleep 30`, timeoutSeconds: 5 });
    cp.send(overrun);
    const { result } = await cp.waitFor(isResultOf(waiting.lease_id));
    expect(result).toMatchObject({ status: "COMPLETED", reward: 1 });
    expect(result.timing.ready_ms).toBeGreaterThan(5_000);
    const late = await cp.waitFor(isResultOf(overrun.lease_id));
    expect(late.result.status).toBe("TIMEOUT");
    expect(late.result.trajectory.metadata).toMatchObject({
      timeout_source: "session",
      timeout_stage: "exec",
    });
    expect(late.result.timing.ready_ms).toBeGreaterThan(5_000);
    const ran = await cp.waitFor(isResultOf(blocker.lease_id));
    expect(ran.result).toMatchObject({ status: "COMPLETED", reward: 1 });
  });

  it("rejects a bad metadata.agent_timeout naming the key, without running the harness", async () => {
    const { cp } = await start();
    engine.received.length = 0;
    const a = makeAssign({ command: ASK, metadata: { agent_timeout: -3 } });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result).toMatchObject({
      status: "ERROR",
      error: { kind: "configuration", message: expect.stringContaining("metadata.agent_timeout") },
    });
    // No model call (the proxy's health probes of the engine aside).
    expect(engine.received.filter((r) => r.path.endsWith("/chat/completions"))).toHaveLength(0);
  });

  it("hands the task's agent.sampling to the proxy: the engine samples with it, not the harness's", async () => {
    const { cp } = await start();
    engine.received.length = 0;
    const a = makeAssign({
      command: ASK,
      agent: {
        harness: "shell",
        custom_shell: { command: ASK, env: { ASK_SCRIPT } },
        sampling: { temperature: 0.9, top_k: 20 },
      },
    });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result.status).toBe("COMPLETED");
    const chat = engine.received.filter((r) => r.path.endsWith("/chat/completions"));
    expect(chat).toHaveLength(1);
    expect(chat[0]!.body).toMatchObject({ temperature: 0.9, top_k: 20 });
  });

  it("sends the task's engine_priority on each model call in the engine's order, and none where it is off", async () => {
    // An engine that runs lower values first (vLLM --scheduling-policy priority): the task's 7
    // (higher runs first, Polar's order) is sent as -7.
    const { cp } = await start({ enginePriority: "lower_first" });
    engine.received.length = 0;
    const a = makeAssign({ command: ASK });
    a.session.engine_priority = 7;
    cp.send(a);
    expect((await cp.waitFor(isResultOf(a.lease_id))).result.status).toBe("COMPLETED");
    const sent = engine.received.filter((r) => r.path.endsWith("/chat/completions"));
    expect(sent.map((r) => r.body.priority)).toEqual([-7]);
    await gateway?.stop();
    gateway = null;
    await cp.close();

    // `auto` against an engine that reports no priority scheduling at /server_info: nothing sent.
    const again = await start();
    engine.received.length = 0;
    const b = makeAssign({ command: ASK });
    b.session.engine_priority = 7;
    again.cp.send(b);
    expect((await again.cp.waitFor(isResultOf(b.lease_id))).result.status).toBe("COMPLETED");
    const plain = engine.received.filter((r) => r.path.endsWith("/chat/completions"));
    expect(plain).toHaveLength(1);
    expect(plain[0]!.body).not.toHaveProperty("priority");
  });

  it("an engine failure the proxy's retries could not hide ends the session as infra, never graded", async () => {
    const { cp } = await start({ engineRetryMs: 600 });
    engine.behaviour = { status: 503 };
    try {
      // After the refused call the harness would sleep 30 s: whatever it does, the session is an
      // infra failure (the ledger runs it again), and its harness is stopped at once.
      const a = makeAssign({ command: `${ASK} || sleep 30` });
      cp.send(a);
      const { result } = await cp.waitFor(isResultOf(a.lease_id));
      expect(result).toMatchObject({
        status: "ERROR",
        error: { kind: "infra", message: "an engine failure reached the harness: engine answered HTTP 503" },
        reward: null,
      });
      // Stopped at once, not after the harness's 30 s sleep.
      expect(result.timing.run_ms).toBeLessThan(20_000);
    } finally {
      engine.behaviour = {};
    }
  });

  it("a per-trace reward count that does not match the traces makes the session ERROR (upstream merge rule)", async () => {
    const { cp } = await start();
    const a = makeAssign({
      command: ASK,
      evaluator: { strategy: SLOW_EVALUATOR, config: { trace_rewards: [1, 0] } },
    });
    const b = makeAssign({
      command: ASK,
      evaluator: { strategy: SLOW_EVALUATOR, config: { trace_rewards: [0.25] } },
    });
    cp.send(a);
    cp.send(b);
    const ra = (await cp.waitFor(isResultOf(a.lease_id))).result;
    const rb = (await cp.waitFor(isResultOf(b.lease_id))).result;
    expect(ra).toMatchObject({
      status: "ERROR",
      error: { message: expect.stringContaining("2 trace rewards for 1 traces") },
    });
    expect(rb.status).toBe("COMPLETED");
    expect(rb.trajectory.traces[0]?.reward).toBe(0.25);
    expect(rb.reward).toBe(0.5);
  });

  it("drain: acknowledges the admin request and grants no more credit", async () => {
    const { cp } = await start();
    cp.send({ v: WIRE_VERSION, type: "admin", request_id: "req-1", action: "drain" });
    const ack = await cp.waitFor((m) => m.type === "admin_ack");
    expect(ack).toMatchObject({ type: "admin_ack", request_id: "req-1", ok: true });
    const before = cp.received.length;
    const a = makeAssign({ command: "true", evaluator: null });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result.error?.message).toContain("draining");
    // A credit for the refused assign's slot would go out right after its result (once
    // journaled); a status request answered after that proves the gateway got that far.
    cp.send({ v: WIRE_VERSION, type: "admin", request_id: "req-2", action: "status" });
    await cp.waitFor((m) => m.type === "admin_ack" && m.request_id === "req-2");
    expect(cp.received.slice(before).filter((r) => r.message.type === "credit")).toEqual([]);
  });
});

/** Reads the instruction from its file (any size) and asks the model once. */
const ASK_FILE = `node --input-type=module -e 'const fs = await import("node:fs"); const q = fs.readFileSync(process.env.POLAR_INSTRUCTION_FILE, "utf8"); const r = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {method: "POST", headers: {authorization: "Bearer " + process.env.OPENAI_API_KEY, "content-type": "application/json"}, body: JSON.stringify({model: "m", messages: [{role: "user", content: q}]})}); if (!r.ok) process.exit(2);'`;

describe("custom modules by path", { timeout: 60_000 }, () => {
  it("runs a custom harness in a custom runtime backend", async () => {
    const { cp, gateway } = await start({ keepWorkspaces: true });
    const modules = path.join(import.meta.dirname, "testing", "modules");
    const a = makeAssign({
      command: "",
      agent: {
        import_path: `${modules}/custom-harness.mjs:plan`,
        settings: { after: ASK },
        env: { ASK_SCRIPT },
      },
      runtime: { import_path: `${modules}/custom-runtime.mjs:create`, kwargs: { flavour: "vanilla" } },
    });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result.error).toBeNull();
    expect(result.reward).toBe(1);
    const dir = path.join(gateway.workRoot, "sessions", a.session.session_id);
    const { readFile } = await import("node:fs/promises");
    expect(await readFile(path.join(dir, "commands.log"), "utf8")).toMatch(
      /^start vanilla\ncat "\$HOME\/custom.json"/,
    );
    expect(await readFile(path.join(dir, "home", "custom.json"), "utf8")).toBe(`{"model":"${MODEL}"}`);
    expect(result.trajectory.traces).toHaveLength(1); // the plan's command reached the proxy
  });
});

describe("artifact uploads", { timeout: 60_000 }, () => {
  it("uploads completion records, and a large trajectory by reference with empty inline traces", async () => {
    const { cp } = await start();
    const small = makeAssign({ command: ASK });
    const big = makeAssign({ command: ASK_FILE, instruction: "lorem ipsum dolor sit amet ".repeat(6000) });
    cp.send(small);
    cp.send(big);
    const s = ResultMessage.parse(await cp.waitFor(isResultOf(small.lease_id)));
    expect(s.completions_ref).toMatchObject({ key: `${small.session.session_id}/completions` });
    expect(s.trajectory_ref).toBeUndefined();
    expect(s.result.trajectory.traces).toHaveLength(1);
    const stored = cp.artifacts.find((x) => x.key === s.completions_ref?.key);
    expect(stored).toMatchObject({ lease_id: small.lease_id, authorization: `Bearer ${TOKEN}` });
    expect(stored?.body).toHaveLength(1);

    const b = ResultMessage.parse(await cp.waitFor(isResultOf(big.lease_id)));
    expect(b.result.error).toBeNull();
    expect(b.trajectory_ref).toMatchObject({ key: `${big.session.session_id}/trajectory` });
    expect(b.result.trajectory.traces).toEqual([]);
    const traj = cp.artifacts.find((x) => x.key === b.trajectory_ref?.key)?.body as { traces: unknown[] };
    expect(traj.traces).toHaveLength(1);
  });

  it("retries failed uploads with backoff: each wait doubles the one before", async () => {
    // The jitter at its top, so each wait is its whole ceiling: 40, 80, then 160 ms.
    const random = vi.spyOn(Math, "random").mockReturnValue(0.999_999);
    try {
      const { cp } = await start(
        { uploadPolicy: { initialDelayMs: 40, maxDelayMs: 1_000, concurrency: 4 } },
        { artifacts: 3 },
      );
      const a = makeAssign({ command: ASK });
      cp.send(a);
      const m = await cp.waitFor(isResultOf(a.lease_id));
      expect(m.completions_ref).toMatchObject({ key: `${a.session.session_id}/completions` });
      expect(cp.uploadAttempts).toBe(5); // 3 failures, then the records and the logs
      // From one attempt's arrival to the next: the wait plus a round trip, so never shorter
      // than the wait (1 ms of timer rounding allowed). Without the doubling all three would be
      // 40 ms plus a round trip.
      const t = cp.uploadTimes;
      const waits = [t[1]! - t[0]!, t[2]! - t[1]!, t[3]! - t[2]!];
      [40, 80, 160].forEach((ceiling, i) => {
        expect(waits[i], `wait ${i + 1} of ${waits.map(Math.round).join(", ")} ms`).toBeGreaterThanOrEqual(
          ceiling - 1,
        );
      });
    } finally {
      random.mockRestore();
    }
  });

  it("without the route: the result still arrives, inline, noting the failed upload", async () => {
    const { cp } = await start({}, { artifacts: "missing" });
    const a = makeAssign({ command: ASK });
    cp.send(a);
    const m = await cp.waitFor(isResultOf(a.lease_id));
    expect(m.completions_ref).toBeUndefined();
    expect(m.result.status).toBe("COMPLETED");
    expect(m.result.trajectory.traces).toHaveLength(1);
    expect(m.result.trajectory.metadata.completions_upload_error).toMatch(/HTTP 404/);
    expect(m.result.trajectory.metadata.logs_upload_error).toMatch(/HTTP 404/);
    expect(m.logs_ref).toBeUndefined();
  });
});

describeWith(["bubblewrap"], "sessions in the bubblewrap sandbox", { timeout: 60_000 }, () => {
  it("a harness that tries to escape fails at it, still reaches the proxy, and the session reports", async () => {
    const host = http.createServer((_req, res) => res.end("host-secret-service"));
    await new Promise<void>((r) => host.listen(0, "127.0.0.1", r));
    const port = (host.address() as AddressInfo).port;
    const escapeFile = path.join(process.cwd(), `polar-escape-${process.pid}.txt`);
    try {
      const { cp } = await start({
        keepWorkspaces: true,
        runtimeSettings: { local: { sandbox: "always", bwrapPath: "bwrap" } },
      });
      const probe = `node -e 'fetch("http://127.0.0.1:${port}/").then(r=>r.text()).then(t=>console.log("TCP-OK",t),e=>console.log("TCP-BLOCKED"))'`;
      const a = makeAssign({
        command: [
          `(echo pwned > '${escapeFile}' && echo WROTE-OUTSIDE) || echo WRITE-BLOCKED`,
          probe,
          ASK,
        ].join("; "),
        runtime: { allow_internet: false },
      });
      cp.send(a);
      const { result } = await cp.waitFor(isResultOf(a.lease_id));
      expect(result.status).toBe("COMPLETED");
      expect(result.reward).toBe(1);
      expect(existsSync(escapeFile)).toBe(false);
      const log = await import("node:fs/promises").then((fs) =>
        fs.readFile(
          path.join(
            gateway!.workRoot,
            "sessions",
            a.session.session_id,
            "logs",
            "agent",
            "shell.step00.stdout.log",
          ),
          "utf8",
        ),
      );
      expect(log).toContain("WRITE-BLOCKED");
      expect(log).toContain("TCP-BLOCKED");
      expect(log).not.toContain("host-secret-service");
    } finally {
      host.closeAllConnections();
      await new Promise<void>((r) => host.close(() => r()));
    }
  });
});
