/**
 * Property-based fuzzing of the gateway wire protocol over real WebSockets to a QueueDO: each case
 * opens a connection and sends a sequence of frames — text that is not JSON, binary frames, JSON
 * of any shape, well-formed messages with wrong types or hostile values, unknown types, messages
 * out of order (progress or result before hello), replays of the case's earlier frames, and
 * progress and results for leases the connection never held (random ids, and the lease of another
 * gateway that stays connected throughout). Every frame the control plane answers must be a valid
 * control message and never `internal` or `result_not_recorded` (the wire's 5xx); a connection may
 * only be closed with the documented codes (4400 unsupported version, 4403 node mismatch). After
 * the run the other gateway's lease is still its own and a normal batch completes.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CLOSE_NODE_MISMATCH,
  CLOSE_UNSUPPORTED_VERSION,
  ControlMessage,
  type SessionAssignment,
} from "../../protocol";
import {
  anyJson,
  applyEdits,
  deepArray,
  type Edit,
  edits,
  fuzzParameters,
  fuzzTimeout,
  hostileScalar,
  reported,
} from "../../test/support/fuzz";
import { call, Gateway, postBatch, resultFor, TOKENS, task } from "../testing/fixtures";
import { expectNormalBatchCompletes, keepAlive, nextOfType, workerFuzzSettings } from "./support";

const settings = workerFuzzSettings(200);

const QUEUE = "fw-q";
const VICTIM_NODE = "fw-victim";
/** Node ids the fuzz connections use (never the victim's: a shared token may replace any node). */
const NODES = ["fw-a", "fw-b", "fw-c", "fw-d"];

let victim: Gateway;
let victimLease = "";
let victimSession: SessionAssignment;

/** What a frame refers to, resolved when it is sent (leases arrive while the case runs). */
type LeaseChoice = "own" | "victim" | "random" | "empty" | "long";

const leaseChoice = fc.constantFrom<LeaseChoice>("own", "own", "victim", "random", "empty", "long");

/** A frame to send, described before the case runs. */
type FrameSpec =
  | { kind: "hello"; v: unknown; node: string; credit: unknown; leases: LeaseChoice[]; extra: unknown }
  | { kind: "credit"; v: unknown; grant: unknown; metrics: unknown }
  | { kind: "progress"; lease: LeaseChoice; status: unknown; at: unknown; v: unknown }
  | { kind: "result"; lease: LeaseChoice; edits: Edit[]; status: unknown }
  | { kind: "admin_ack"; requestId: unknown; paused: unknown }
  | { kind: "unknown"; value: unknown }
  | { kind: "text"; text: string }
  | { kind: "binary"; bytes: Uint8Array }
  | { kind: "replay"; index: number }
  | { kind: "deep"; lease: LeaseChoice; depth: number };

const version = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(1, 2, 3) },
  { weight: 1, arbitrary: fc.constantFrom(0, 4, "1", null, 1.5, -1) },
);

const frame: fc.Arbitrary<FrameSpec> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("hello" as const),
      v: version,
      node: fc.oneof(
        { weight: 8, arbitrary: fc.constantFrom(...NODES) },
        { weight: 1, arbitrary: fc.constantFrom("", "-bad", "x".repeat(129), "a/b") },
      ),
      credit: fc.oneof(fc.constantFrom(0, 1, 2, 3), hostileScalar),
      leases: fc.array(leaseChoice, { maxLength: 3 }),
      extra: fc.option(
        fc.dictionary(fc.constantFrom("capacity", "capabilities", "agent_version", "bogus"), anyJson, {
          maxKeys: 2,
        }),
        { freq: 4 },
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("credit" as const),
      v: version,
      grant: fc.oneof(fc.constantFrom(1, 2), hostileScalar),
      metrics: fc.option(anyJson, { freq: 4 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("progress" as const),
      lease: leaseChoice,
      status: fc.oneof(fc.constantFrom("INITIALIZING", "READY", "RUNNING", "POST_RUN"), hostileScalar),
      at: fc.oneof(fc.constant(1), hostileScalar),
      v: version,
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("result" as const),
      lease: leaseChoice,
      edits: edits([
        "reward",
        "metadata",
        "trajectory",
        "trajectory.status",
        "trajectory.metadata",
        "trajectory.traces",
        "trajectory.traces.0",
        "trajectory.traces.0.prompt_ids",
        "trajectory.traces.0.response_ids",
        "trajectory.traces.0.loss_mask",
        "trajectory.traces.0.response_logprobs",
        "trajectory.traces.0.reward",
        "trajectory.traces.0.metadata",
        "trajectory.error",
        "timing",
        "timing.run_ms",
        "error",
        "node_id",
        "attempt",
        "status",
        "session_id",
        "batch_id",
        "task_id",
      ]),
      status: fc.constantFrom("COMPLETED", "ERROR", "TIMEOUT", "CANCELLED"),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("admin_ack" as const),
      requestId: fc.oneof(fc.constantFrom("adm_1", "unawaited_1", ""), hostileScalar),
      paused: fc.oneof(fc.boolean(), hostileScalar),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("unknown" as const),
      value: fc.oneof(
        fc.record({
          v: version,
          type: fc.oneof(
            fc.constantFrom("assign", "welcome", "ack", "cancel", "admin", "error", "hello2", ""),
            hostileScalar,
          ),
        }),
        anyJson,
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("text" as const),
      text: fc.oneof(
        fc.string({ maxLength: 30 }),
        fc.constantFrom(
          "",
          "ping",
          "pong",
          "{",
          "null",
          "[]",
          '{"v":1}',
          '{"type":"hello"}',
          "\u0000",
          "[".repeat(100_000) + "]".repeat(100_000),
          `{"v":1,"type":"credit","grant":1,"metrics":${JSON.stringify(deepArray(3000))}}`,
          "x".repeat(1_000_000),
        ),
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("binary" as const),
      bytes: fc.oneof(
        fc.uint8Array({ maxLength: 30 }),
        fc.constant(new TextEncoder().encode('{"v":1,"type":"credit","grant":1}')),
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("replay" as const), index: fc.nat(8) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("deep" as const),
      lease: leaseChoice,
      depth: fc.constantFrom(200, 6000, 20_000),
    }),
  },
);

/** A case: an optional `node_id` in the connect URL, then frames. */
const scenario = fc.record({
  hint: fc.option(fc.constantFrom(...NODES), { freq: 4 }),
  frames: fc.array(frame, { minLength: 1, maxLength: 7 }),
});

/** One connection's view of the case: what it was assigned and everything it received. */
class Connection {
  readonly assigned: SessionAssignment[] = [];
  readonly leases: string[] = [];
  readonly received: string[] = [];

  private waiter: { match: (frame: string) => boolean; done: (ok: boolean) => void } | null = null;

  constructor(readonly gw: Gateway) {
    gw.ws.addEventListener("close", () => this.waiter?.done(true));
    gw.ws.addEventListener("message", (event) => {
      const text =
        typeof event.data === "string" ? event.data : new TextDecoder().decode(event.data as ArrayBuffer);
      this.received.push(text);
      if (this.waiter?.match(text)) this.waiter.done(true);
      if (text === "pong") return;
      try {
        const message = JSON.parse(text) as ControlMessage;
        if (message.type === "assign") {
          this.assigned.push(message.session);
          this.leases.push(message.lease_id);
        }
      } catch {
        // checked below: every frame must be a control message
      }
    });
  }

  /** Resolves true once a frame matches (or the socket closes), false after `timeoutMs`. */
  waitFor(match: (frame: string) => boolean, timeoutMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      if (this.gw.closed) return resolve(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.waiter = null;
        resolve(ok);
      };
      this.waiter = { match, done };
    });
  }

  lease(choice: LeaseChoice): { lease_id: string; session: SessionAssignment } {
    const own = this.leases.length - 1;
    if (choice === "own" && own >= 0) return { lease_id: this.leases[own]!, session: this.assigned[own]! };
    if (choice === "victim") return { lease_id: victimLease, session: victimSession };
    const lease_id =
      choice === "empty" ? "" : choice === "long" ? `l_${"9".repeat(200)}` : `l_${crypto.randomUUID()}`;
    return { lease_id, session: { ...victimSession, session_id: `fw-none.0.${this.leases.length}` } };
  }
}

function build(spec: FrameSpec, conn: Connection, sent: (string | Uint8Array)[]): string | Uint8Array {
  switch (spec.kind) {
    case "hello":
      return JSON.stringify({
        v: spec.v,
        type: "hello",
        node_id: spec.node,
        agent_version: "fuzz",
        capacity: { max_init: 2, max_run: 2, max_postrun: 2 },
        capabilities: { runtimes: ["local"], harnesses: ["shell"], engines: ["sim"] },
        credit: spec.credit,
        leases: spec.leases.map((c) => {
          const { lease_id, session } = conn.lease(c);
          return { lease_id, session_id: session.session_id };
        }),
        ...(spec.extra as object | null),
      });
    case "credit":
      return JSON.stringify({
        v: spec.v,
        type: "credit",
        grant: spec.grant,
        ...(spec.metrics === null ? {} : { metrics: spec.metrics }),
      });
    case "progress": {
      const { lease_id, session } = conn.lease(spec.lease);
      return JSON.stringify({
        v: spec.v,
        type: "progress",
        lease_id,
        session_id: session.session_id,
        status: spec.status,
        at: spec.at,
      });
    }
    case "result": {
      const { lease_id, session } = conn.lease(spec.lease);
      const result = applyEdits({ ...resultFor(session, NODES[0]!), status: spec.status }, spec.edits);
      return JSON.stringify({ v: 1, type: "result", lease_id, result });
    }
    case "admin_ack":
      return JSON.stringify({
        v: 1,
        type: "admin_ack",
        request_id: spec.requestId,
        ok: true,
        paused: spec.paused,
        inflight: 0,
        policy_version: null,
      });
    case "unknown":
      return JSON.stringify(spec.value) ?? "null";
    case "text":
      return spec.text;
    case "binary":
      return spec.bytes;
    case "replay":
      return sent.length === 0 ? "ping" : sent[spec.index % sent.length]!;
    case "deep": {
      // A well-formed result whose metadata nests deeper than JSON.stringify can follow; written
      // as text, since the test could not stringify it either.
      const { lease_id, session } = conn.lease(spec.lease);
      const result = { ...resultFor(session, NODES[0]!), metadata: { deep: "DEEP" } };
      const deep = `${'{"a":'.repeat(spec.depth)}1${"}".repeat(spec.depth)}`;
      return JSON.stringify({ v: 1, type: "result", lease_id, result }).replace('"DEEP"', deep);
    }
  }
}

let sentinels = 0;

/**
 * Sends a frame no other frame can be mistaken for (its text appears in the parse error the
 * control plane answers) and waits for that answer, or for the socket to close.
 */
async function settle(conn: Connection): Promise<void> {
  const mark = `!s${++sentinels}!`;
  const answered = conn.waitFor((frame) => frame.includes(mark), 15_000);
  try {
    conn.gw.ws.send(mark);
  } catch {
    return;
  }
  if (!(await answered)) throw new Error(`no answer to ${mark} within 15 s`);
}

/** Batches of work for the fuzz nodes, one more every {@link WORK_EVERY} cases (cancelled at the end). */
const workBatches: string[] = [];
const WORK_EVERY = 300;
let cases = 0;

async function addWork(): Promise<void> {
  const batchId = `fw-work-${workBatches.length}`;
  workBatches.push(batchId);
  const res = await postBatch({ batch_id: batchId, queue: QUEUE, tasks: [task("t0", { num_samples: 512 })] });
  expect(res.status).toBe(201);
}

/** Runs one case; the invariants hold for everything the connection received. */
async function runCase(s: { hint: string | null; frames: FrameSpec[] }): Promise<void> {
  if (++cases % WORK_EVERY === 0) await addWork();
  const gw = await Gateway.connect(QUEUE, TOKENS.gateway, s.hint ?? undefined);
  const conn = new Connection(gw);
  const sent: (string | Uint8Array)[] = [];
  try {
    for (const spec of s.frames) {
      if (gw.closed) break;
      const data = build(spec, conn, sent);
      sent.push(data);
      try {
        gw.ws.send(data);
      } catch {
        break;
      }
      await settle(conn);
    }
  } finally {
    gw.close();
  }
  for (const text of conn.received) {
    if (text === "pong") continue;
    const parsed = ControlMessage.safeParse(JSON.parse(text));
    expect(parsed.success, `not a control message: ${text.slice(0, 300)}`).toBe(true);
    if (parsed.success && parsed.data.type === "error")
      expect(["internal", "result_not_recorded"], `server failure: ${text.slice(0, 300)}`).not.toContain(
        parsed.data.code,
      );
  }
  if (gw.closed && gw.closed.code !== 1000)
    expect([CLOSE_UNSUPPORTED_VERSION, CLOSE_NODE_MISMATCH], `closed ${JSON.stringify(gw.closed)}`).toContain(
      gw.closed.code,
    );
  expect(victim.closed, "the other gateway was disconnected").toBeNull();
}

beforeAll(async () => {
  // The victim holds one lease for the whole run; a batch with plenty of work for the fuzz nodes.
  expect((await postBatch({ batch_id: "fw-victim-batch", queue: QUEUE, tasks: [task("t0")] })).status).toBe(
    201,
  );
  victim = await Gateway.connect(QUEUE, TOKENS.gateway, VICTIM_NODE);
  victim.hello(VICTIM_NODE, 1);
  await victim.expect("welcome");
  const assign = await victim.expect("assign");
  victimLease = assign.lease_id;
  victimSession = assign.session;
  stopKeepAlive = keepAlive(victim);
  await addWork();
}, 60_000);

let stopKeepAlive = () => {};
afterAll(() => {
  stopKeepAlive();
  victim?.close();
});

describe("fuzz: gateway wire messages over a real WebSocket", () => {
  it(
    `answers ${settings.numRuns} arbitrary frame sequences with valid control messages, never internal, other gateways unaffected`,
    async () => {
      await fc.assert(
        fc.asyncProperty(scenario, reported("wire", runCase)),
        fuzzParameters(settings, "gateway wire"),
      );
      // The victim's lease survived every attempt on it: its own result is the one accepted.
      const view = await call(`/v1/sessions/${victimSession.session_id}`, {
        headers: { Authorization: `Bearer ${TOKENS.trainer}` },
      });
      expect(await view.json()).toMatchObject({
        status: "ASSIGNED",
        lease_id: victimLease,
        node_id: VICTIM_NODE,
      });
      victim.send({
        v: 1,
        type: "result",
        lease_id: victimLease,
        result: resultFor(victimSession, VICTIM_NODE),
      });
      expect(await nextOfType(victim, "ack")).toMatchObject({ lease_id: victimLease, status: "accepted" });
      // The fuzz nodes' work is withdrawn, so the check's sessions are the ones dispatched.
      for (const batchId of workBatches) {
        const res = await call(`/v1/batches/${batchId}`, {
          method: "DELETE",
          headers: { Authorization: `Bearer ${TOKENS.trainer}` },
        });
        expect(res.status).toBe(200);
      }
      await expectNormalBatchCompletes(QUEUE);
    },
    fuzzTimeout(settings, 300),
  );
});
