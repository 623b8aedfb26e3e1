import { existsSync, readFileSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  AssignMessage,
  type GatewayMessage,
  HelloMessage,
  type ProgressMessage,
  type ResultMessage,
  ResultMessage as ResultMessageSchema,
  WIRE_VERSION,
} from "../protocol";
import {
  type FixtureEngine,
  QWEN3_IM_END,
  qwen3,
  qwen3PromptIds,
  startFixtureEngine,
} from "../proxy/testing/fixture-engine";
import { type Gateway, startGateway } from "./gateway";
import { PRIVATE_DIR } from "./runtime";
import { type FakeControlPlane, startFakeControlPlane } from "./testing/fake-control-plane";

const TOKEN = "test-gateway-token";
const MODEL = "Qwen/Qwen3-8B";
const quiet = { info() {}, warn() {}, error() {} };

/** The harness: one chat call with the instruction (argv[1]) through the proxy, prints the answer. */
const ASK_SCRIPT = `
const res = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {
  method: "POST",
  headers: { authorization: "Bearer " + process.env.OPENAI_API_KEY, "content-type": "application/json" },
  body: JSON.stringify({ model: process.env.OPENAI_MODEL, messages: [{ role: "user", content: process.argv[1] }] }),
});
const text = await res.text();
if (!res.ok) { console.error(res.status, text); process.exit(2); }
console.log(JSON.parse(text).choices[0].message.content);
`;
const ASK = `node --input-type=module -e "$ASK_SCRIPT" -- {{INSTRUCTION}}`;

let engine: FixtureEngine;
let cp: FakeControlPlane;
let gateway: Gateway | null = null;
let scratch: string;
/**
 * A file in the scratch folder that a session reports into: writable by everyone, since a root
 * gateway runs each session as a user of its own.
 */
async function reportFile(name: string): Promise<string> {
  const file = path.join(scratch, name);
  await writeFile(file, "");
  await chmod(file, 0o666);
  return file;
}
let leaseCounter = 0;

beforeAll(async () => {
  engine = await startFixtureEngine({ model: MODEL });
});
afterAll(async () => {
  await engine.close();
});
beforeEach(async () => {
  cp = await startFakeControlPlane({ token: TOKEN });
  scratch = await mkdtemp(path.join(tmpdir(), "polar-gw-test-"));
});
afterEach(async () => {
  await gateway?.stop();
  gateway = null;
  await cp.close();
  await rm(scratch, { recursive: true, force: true });
  engine.received.length = 0;
});

async function start(extra: Partial<Parameters<typeof startGateway>[0]> = {}): Promise<Gateway> {
  gateway = await startGateway({
    controlPlaneUrl: cp.url,
    nodeId: "gpu-node-1",
    token: TOKEN,
    queue: "q1",
    engine: "sglang-openai",
    engineUrl: engine.url,
    model: MODEL,
    workRoot: path.join(scratch, "work"),
    reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
    logger: quiet,
    // Plain processes here, so tests can see host pids and files; the sandbox has its own tests.
    runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
    ...extra,
  });
  await cp.waitFor(isHello(0)); // assigns only make sense once the gateway is connected
  return gateway;
}

interface AssignOptions {
  command: string;
  instruction?: string;
  timeoutSeconds?: number;
  env?: Record<string, string>;
  agent?: Record<string, unknown>;
  evaluator?: Record<string, unknown> | null;
  runtime?: Record<string, unknown> | null;
  metadata?: Record<string, unknown>;
  priority?: number;
}

function assign(o: AssignOptions): AssignMessage {
  const n = ++leaseCounter;
  return AssignMessage.parse({
    v: WIRE_VERSION,
    type: "assign",
    lease_id: `lease-${n}`,
    session: {
      session_id: `batch1.t1.${n}`,
      batch_id: "batch1",
      task_id: "t1",
      attempt: 1,
      instruction: o.instruction ?? "What is 2 + 2?",
      timeout_seconds: o.timeoutSeconds ?? 60,
      runtime: o.runtime ?? null,
      agent: o.agent ?? {
        harness: "shell",
        custom_shell: { command: o.command, env: { ASK_SCRIPT, ...(o.env ?? {}) } },
      },
      builder: { strategy: "per_request" },
      evaluator: o.evaluator === undefined ? { strategy: "session_completed" } : o.evaluator,
      metadata: { dataset: "unit", row: n, ...(o.metadata ?? {}) },
      dispatch_priority: o.priority ?? 0,
    },
  });
}

const isResult =
  (leaseId: string, connection?: number) =>
  (m: GatewayMessage, r: { connection: number }): m is ResultMessage =>
    m.type === "result" &&
    m.lease_id === leaseId &&
    (connection === undefined || r.connection === connection);

const isHello =
  (connection: number) =>
  (m: GatewayMessage, r: { connection: number }): m is HelloMessage =>
    m.type === "hello" && r.connection === connection;

function isAlive(pid: number): boolean {
  try {
    // A zombie (killed, not yet reaped) counts as dead.
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

describe("gateway agent", { timeout: 40_000 }, () => {
  it("says hello, runs an assigned shell session through the proxy and reports a scored result", async () => {
    await start();
    const hello = await cp.waitFor(isHello(0));
    expect(HelloMessage.parse(hello)).toEqual({
      v: WIRE_VERSION,
      type: "hello",
      node_id: "gpu-node-1",
      agent_version: expect.any(String),
      capacity: { max_init: 2, max_run: 2, max_postrun: 2 },
      capabilities: {
        runtimes: ["local", "docker", "apptainer"],
        harnesses: [
          "shell",
          "claude_code",
          "codex",
          "qwen_code",
          "opencode",
          "gemini_cli",
          "pi",
          "mini_swe_agent",
          "copilot_cli",
          "cline",
          "kilo_code",
          "continue",
          "grok_cli",
          "nanocoder",
        ],
        engines: ["sglang-openai"],
      },
      // Free INIT slots plus the READY gap: max_init + max_run.
      credit: 4,
      leases: [],
    });
    expect(cp.upgrades[0]).toEqual({
      url: "/v1/gateways/connect?queue=q1&node_id=gpu-node-1",
      authorization: `Bearer ${TOKEN}`,
    });

    // Malformed control messages are ignored, the connection survives them.
    cp.send("this is not json");
    cp.send(JSON.stringify({ v: WIRE_VERSION, type: "assign", lease_id: "x" }));
    cp.send(JSON.stringify({ v: 99, type: "ack" }));

    const instruction = `Say "hi" to $HOME, it's \`date\` & $(id) {{INSTRUCTION}}\n-- then stop; exit 9`;
    const a = assign({ command: ASK, instruction });
    cp.send(a);
    // On the first connection: the malformed messages did not cost a reconnect (no second dial,
    // no second hello, the result on the socket the malformed frames came on).
    const result = ResultMessageSchema.parse(await cp.waitFor(isResult(a.lease_id, 0)));
    expect(cp.upgrades).toHaveLength(1);
    expect(cp.received.filter((r) => r.message.type === "hello")).toHaveLength(1);
    expect(gateway!.stats().connects).toBe(1);

    const stages = cp.received
      .map((r) => r.message)
      .filter((m): m is ProgressMessage => m.type === "progress" && m.lease_id === a.lease_id)
      .map((m) => m.status);
    expect(stages).toEqual(["INITIALIZING", "READY", "RUNNING", "POST_RUN"]);

    const r = result.result;
    expect(r.error).toBeNull();
    expect(r.status).toBe("COMPLETED");
    expect(r.reward).toBe(1);
    expect(r).toMatchObject({
      session_id: a.session.session_id,
      task_id: "t1",
      batch_id: "batch1",
      node_id: "gpu-node-1",
      attempt: 1,
      metadata: a.session.metadata,
    });
    expect(r.timing.total_ms).toBeGreaterThan(0);
    expect(r.timing.run_ms).toBeGreaterThan(0);
    expect(r.trajectory.status).toBe("COMPLETED");
    expect(r.trajectory.metadata).toMatchObject({
      builder: "per_request",
      session_id: a.session.session_id,
      task_id: "t1",
    });
    expect(r.trajectory.traces).toHaveLength(1);
    const trace = r.trajectory.traces[0]!;
    const userTurn = [{ role: "user", content: instruction }];
    expect(trace.prompt_ids).toEqual(qwen3PromptIds(userTurn));
    expect(trace.response_ids).toEqual([
      ...qwen3().tokenizer.encode(`You said: ${instruction}`, { add_special_tokens: false }),
      QWEN3_IM_END,
    ]);
    expect(trace.response_logprobs).toHaveLength(trace.response_ids.length);
    expect(trace.loss_mask.every((m) => m === 1)).toBe(true);
    expect(trace.reward).toBe(1);
    expect(trace.prompt_messages).toEqual(userTurn);

    // {{INSTRUCTION}} reached the harness as one literal argument; the engine got the served flags.
    // (Only the model calls: the proxy's replica health probes may reach the engine meanwhile.)
    const calls = engine.received.filter((r) => r.path === "/v1/chat/completions");
    expect(calls).toHaveLength(1);
    expect(calls[0]!.body.messages).toEqual(userTurn);
    expect(calls[0]!.body.model).toBe(MODEL);
    expect(calls[0]!.headers["x-smg-routing-key"]).toBe(a.session.session_id);

    // The fake acked it: nothing stays pending, the slot came back as credit.
    await expect.poll(() => gateway!.stats().unackedResults, { timeout: 10_000 }).toBe(0);
    expect(cp.invalid).toEqual([]);
  });

  it("starts clean: session folders and session users' private files of a previous run are removed", async () => {
    const work = path.join(scratch, "work");
    await mkdir(path.join(work, "sessions", "old.t.0", "workspace"), { recursive: true });
    await mkdir(path.join(work, PRIVATE_DIR, "old.t.0-x1"), { recursive: true });
    await writeFile(path.join(work, PRIVATE_DIR, "old.t.0-x1", "passwd"), "old\n");
    await start();
    expect(existsSync(path.join(work, "sessions", "old.t.0"))).toBe(false);
    expect(existsSync(path.join(work, PRIVATE_DIR, "old.t.0-x1"))).toBe(false);
  });

  it("keeps the gateway's secrets out of the harness environment and writes instruction.txt", async () => {
    process.env.POLAR_GATEWAY_TOKEN = TOKEN;
    process.env.SOME_CLOUD_SECRET = "hunter2-secret-value";
    try {
      await start({ keepWorkspaces: true });
      const out = await reportFile("harness-env.txt");
      const a = assign({ command: `env > "$ENV_OUT"`, env: { ENV_OUT: out }, evaluator: null });
      cp.send(a);
      const result = await cp.waitFor(isResult(a.lease_id));
      const env = await readFile(out, "utf8");
      expect(env).not.toContain("POLAR_GATEWAY_TOKEN");
      expect(env).not.toContain(TOKEN);
      expect(env).not.toContain("hunter2-secret-value");
      expect(env).toMatch(/^OPENAI_API_KEY=sk-polar-[0-9a-f]{32}$/m);
      expect(env).toContain(`OPENAI_BASE_URL=${gateway!.proxyUrl}/v1\n`);
      expect(env).toContain(`OPENAI_MODEL=${MODEL}\n`);
      expect(env).toContain(`POLAR_SESSION_ID=${a.session.session_id}\n`);
      expect(env).toContain("POLAR_TASK_ID=t1\n");
      expect(env).toContain(`POLAR_INSTRUCTION=${a.session.instruction}\n`);
      expect(env).toMatch(/^PATH=/m);
      const sessionDir = path.join(scratch, "work", "sessions", a.session.session_id);
      expect(await readFile(path.join(sessionDir, "instruction.txt"), "utf8")).toBe(a.session.instruction);
      // No model call: nothing to train on is an agent outcome, no evaluator → reward null.
      expect(result.result).toMatchObject({ status: "ERROR", reward: null, error: { kind: "agent" } });
      expect(result.result.trajectory).toMatchObject({ status: "ERROR", error: "no completions" });
    } finally {
      delete process.env.POLAR_GATEWAY_TOKEN;
      delete process.env.SOME_CLOUD_SECRET;
    }
  });

  it("kills a harness (and its child) that exceeds timeout_seconds and reports TIMEOUT", async () => {
    await start();
    const pidFile = await reportFile("child.pid");
    // 4 s: time enough for INIT and the harness to start its child on a loaded machine (the test
    // is about killing that child, not about a tight budget).
    const a = assign({
      command: `sleep 300 & echo $! > "$PID_FILE"; wait`,
      env: { PID_FILE: pidFile },
      timeoutSeconds: 4,
    });
    cp.send(a);
    // The child runs (its pid written) before the budget ends the session.
    const readPid = async () => Number((await readFile(pidFile, "utf8")).trim());
    await expect.poll(readPid, { timeout: 15_000 }).toBeGreaterThan(0);
    const childPid = await readPid();
    const { result } = await cp.waitFor(isResult(a.lease_id));
    expect(result.status).toBe("TIMEOUT");
    expect(result.error).toMatchObject({ kind: "timeout" });
    expect(result.error?.message).toContain("4 s");
    expect(result.trajectory.status).toBe("TIMEOUT");
    expect(result.reward).toBe(0);
    // Ended by the budget, not by the child's 300 s sleep.
    expect(result.timing.total_ms).toBeLessThan(60_000);
    await expect.poll(() => isAlive(childPid), { timeout: 10_000 }).toBe(false);
  });

  it("reports a non-zero harness exit as ERROR/agent, still building and scoring the trajectory", async () => {
    await start();
    const a = assign({ command: `${ASK} && exit 3` });
    cp.send(a);
    const { result } = await cp.waitFor(isResult(a.lease_id));
    expect(result.status).toBe("ERROR");
    expect(result.error).toEqual({ kind: "agent", message: expect.stringContaining("exited with code 3") });
    expect(result.reward).toBe(0);
    expect(result.trajectory.status).toBe("ERROR");
    expect(result.trajectory.traces).toHaveLength(1);
    expect(result.trajectory.traces[0]!.reward).toBe(0);
  });

  it("re-sends an unacknowledged result after the socket drops, and stops once it is acked", async () => {
    cp.autoAck = false;
    await start();
    await cp.waitFor(isHello(0));
    const a = assign({ command: ASK });
    cp.send(a);
    const first = await cp.waitFor(isResult(a.lease_id, 0));
    cp.drop();

    const hello1 = await cp.waitFor(isHello(1));
    expect(hello1.leases).toEqual([{ lease_id: a.lease_id, session_id: a.session.session_id }]);
    const again = await cp.waitFor(isResult(a.lease_id, 1));
    expect(again).toEqual(first);

    cp.send({
      v: WIRE_VERSION,
      type: "ack",
      lease_id: a.lease_id,
      session_id: a.session.session_id,
      status: "duplicate",
    });
    await expect.poll(() => gateway!.stats().unackedResults, { timeout: 10_000 }).toBe(0);
    cp.drop();
    const hello2 = await cp.waitFor(isHello(2));
    expect(hello2.leases).toEqual([]);
    // Unacknowledged results are re-sent as the welcome is handled; a status request answered
    // on this connection comes after that point.
    cp.send({ v: WIRE_VERSION, type: "admin", request_id: "after-welcome", action: "status" });
    await cp.waitFor(
      (m, r) => m.type === "admin_ack" && m.request_id === "after-welcome" && r.connection === 2,
    );
    expect(cp.received.filter((r) => r.connection === 2 && r.message.type === "result")).toEqual([]);
    expect(gateway!.stats().connects).toBe(3);
  });

  it("grants credit for free INIT slots plus the READY gap, and refuses an assign beyond it", async () => {
    await start({ maxInit: 1, maxRun: 1, maxPostrun: 1 });
    const intake = 2; // max_init + max_run
    const hello = await cp.waitFor(isHello(0));
    expect(hello.credit).toBe(intake);

    // Watch the gateway's own ledger while it works.
    const extra = assign({ command: ASK });
    const violations: string[] = [];
    const watch = setInterval(() => {
      const s = gateway!.stats();
      const m = s.metrics;
      const preRun = m.init_queue_depth + m.init_inflight + m.ready_depth;
      if (preRun + s.outstandingCredit > intake || m.ready_depth > 1) violations.push(JSON.stringify(s));
    }, 2);
    try {
      // INIT takes a while (a prepare step), so both sessions are still before RUN when the extra arrives.
      const assigns = [0, 1].map(() =>
        assign({
          command: `sleep 0.2; ${ASK}`,
          runtime: { prepare: [{ type: "exec", command: "sleep 0.5" }] },
        }),
      );
      for (const a of assigns) cp.send(a);
      cp.send(extra);
      const refused = await cp.waitFor(isResult(extra.lease_id));
      expect(refused.result).toMatchObject({ status: "ERROR", error: { kind: "infra" } });
      expect(refused.result.error?.message).toContain("gateway is full");
      for (const a of assigns) {
        expect((await cp.waitFor(isResult(a.lease_id))).result.status).toBe("COMPLETED");
      }
      await expect.poll(() => gateway!.stats().outstandingCredit, { timeout: 10_000 }).toBe(intake);
    } finally {
      clearInterval(watch);
    }
    expect(violations).toEqual([]);

    // The control plane's view: unused credit plus sessions not yet RUNNING never exceeds the intake.
    let credit = 0;
    const preRun = new Set<string>();
    for (const e of cp.events) {
      const m = e.message;
      if (e.dir === "in" && m.type === "hello") credit = m.credit;
      if (e.dir === "in" && m.type === "credit") credit += m.grant;
      if (m.type === "assign" && m.lease_id !== extra.lease_id) {
        credit--;
        preRun.add(m.lease_id);
      }
      if (m.type === "assign" && m.lease_id === extra.lease_id) credit--;
      if (e.dir === "in" && m.type === "progress" && (m.status === "RUNNING" || m.status === "POST_RUN"))
        preRun.delete(m.lease_id);
      if (e.dir === "in" && m.type === "result") preRun.delete(m.lease_id);
      expect(credit).toBeGreaterThanOrEqual(-1); // the extra assign overdrew by one, on purpose
      expect(credit + preRun.size).toBeLessThanOrEqual(intake);
    }
    expect(preRun.size).toBe(0);
  });

  it("cancels a running session on request and reports CANCELLED", async () => {
    await start();
    const a = assign({ command: "sleep 300" });
    cp.send(a);
    await cp.waitFor((m) => m.type === "progress" && m.lease_id === a.lease_id && m.status === "RUNNING");
    cp.send({
      v: WIRE_VERSION,
      type: "cancel",
      lease_id: a.lease_id,
      session_id: a.session.session_id,
      reason: "batch cancelled",
    });
    const { result } = await cp.waitFor(isResult(a.lease_id));
    expect(result.status).toBe("CANCELLED");
    expect(result.error).toMatchObject({
      kind: "cancelled",
      message: expect.stringContaining("batch cancelled"),
    });
    expect(result.reward).toBeNull();
  });

  it("ends custom module paths that do not load as ERROR/configuration naming the field, at once", async () => {
    await start();
    const modules = path.join(import.meta.dirname, "testing", "modules");
    const harness = assign({ command: "", agent: { import_path: "./no/such/harness.mjs:run" } });
    const evaluator = assign({ command: ASK, evaluator: { strategy: `${modules}/slow-evaluator.mjs:nope` } });
    const runtime = assign({ command: ASK, runtime: { import_path: "./no/such/runtime.mjs:create" } });
    const builder = assign({ command: ASK });
    builder.session.builder = { strategy: "./no/such/builder.mjs:build", config: {} };
    const cases = [
      [harness, "agent.import_path: cannot import './no/such/harness.mjs'"],
      [evaluator, `evaluator.strategy: '${modules}/slow-evaluator.mjs' has no function export 'nope'`],
      [runtime, "runtime.import_path: cannot import './no/such/runtime.mjs'"],
      [builder, "builder.strategy: cannot load './no/such/builder.mjs:build'"],
    ] as const;
    for (const [a] of cases) cp.send(a);
    for (const [a, message] of cases) {
      const { result } = await cp.waitFor(isResult(a.lease_id));
      expect(result).toMatchObject({
        status: "ERROR",
        reward: null, // never scored
        attempt: 1,
        error: { kind: "configuration", message: expect.stringContaining(message) },
      });
      expect(result.trajectory.metadata.evaluation).toBeUndefined();
      expect(result.timing.run_ms).toBe(0); // failed in INIT
    }
    // The harness never ran (health probes of the engine aside).
    expect(engine.received.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(0);
  });
});
