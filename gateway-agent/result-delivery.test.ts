/**
 * Result delivery of a real in-process gateway against the fake control plane: a finished
 * session is held (listed in `hello`) while its upload hangs, uploads are retried past any count,
 * the journal's bound stops intake until acknowledgements free it, and the silent-socket check
 * closes the socket at the liveness limit after the last frame. Then `ResultDelivery` on its own
 * (scripted upload target, memory or stub journal): each of its decisions, one test each.
 */
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import {
  type ArtifactKind,
  type CompletionRecord,
  type HelloMessage,
  LIMITS,
  type LogsUpload,
  ResultMessage,
  type SessionResult,
  type TokenTextUpload,
  type Trace,
  type Trajectory,
  WIRE_VERSION,
} from "../protocol";
import { type FixtureEngine, startFixtureEngine } from "../proxy/testing/fixture-engine";
import { resultMessage, type UploadPolicy } from "./artifacts";
import type { ControlPlaneAnswer, ControlPlaneHttp } from "./control-http";
import { type Gateway, type GatewayOptions, startGateway } from "./gateway";
import { type JournalEntry, ResultJournal } from "./journal";
import { DEFAULT_JOURNAL_MAX_BYTES, ResultDelivery } from "./result-delivery";
import {
  type FakeControlPlane,
  type FakeControlPlaneOptions,
  startFakeControlPlane,
} from "./testing/fake-control-plane";
import { ASK, isResultOf, makeAssign } from "./testing/session-fixtures";

const TOKEN = "delivery-token";
const MODEL = "Qwen/Qwen3-8B";
const quiet = { info() {}, warn() {}, error() {} };

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
  scratch = await mkdtemp(path.join(tmpdir(), "polar-delivery-test-"));
  gateway = await startGateway({
    controlPlaneUrl: cp.url,
    nodeId: "gpu-d",
    token: TOKEN,
    engine: "sglang-openai",
    engineUrl: engine.url,
    model: MODEL,
    workRoot: path.join(scratch, "work"),
    reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
    uploadPolicy: { initialDelayMs: 10, maxDelayMs: 20, concurrency: 4 },
    logger: quiet,
    runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
    ...extra,
  });
  await cp.waitFor((m) => m.type === "hello");
  return { cp, gateway };
}

describe("result delivery", { timeout: 60_000 }, () => {
  it("a finished session whose upload hangs is held: the hello after a reconnect lists it, and it is delivered with its records", async () => {
    const { cp, gateway } = await start({}, { artifacts: "hang" });
    const a = makeAssign({ command: ASK });
    cp.send(a);
    await expect.poll(() => gateway.stats().uploadingResults, { timeout: 20_000 }).toBe(1);
    expect(gateway.stats().active).toBe(0); // finished: only the upload is left
    cp.artifactMode = "store";
    cp.drop(); // the link goes; the hung upload's connection goes with it
    const hello = (await cp.waitFor(
      (m, r) => m.type === "hello" && r.connection === 1,
      10_000,
    )) as HelloMessage;
    expect(hello.leases).toEqual([{ lease_id: a.lease_id, session_id: a.session.session_id }]);
    const m = ResultMessage.parse(await cp.waitFor(isResultOf(a.lease_id)));
    expect(m.completions_ref).toMatchObject({ key: `${a.session.session_id}/completions` });
    expect(m.result.trajectory.metadata.completions_upload_error).toBeUndefined();
    expect(cp.artifacts.find((x) => x.key === m.completions_ref?.key)?.body).toHaveLength(1);
    // The session's logs went the same journaled way: held through the outage, then uploaded.
    expect(m.logs_ref).toMatchObject({ key: `${a.session.session_id}/logs` });
    expect(m.result.trajectory.metadata.logs_upload_error).toBeUndefined();
    await expect.poll(() => gateway.stats().unackedResults, { timeout: 10_000 }).toBe(0);
  });

  it("keeps retrying an upload past any number of failures (here 12) instead of dropping the records", async () => {
    const { cp } = await start({}, { artifacts: 12 });
    const a = makeAssign({ command: ASK });
    cp.send(a);
    const m = ResultMessage.parse(await cp.waitFor(isResultOf(a.lease_id), 30_000));
    expect(m.completions_ref).toBeDefined();
    expect(m.logs_ref).toBeDefined();
    expect(cp.uploadAttempts).toBe(14); // 12 failures, then the records and the logs
  });

  it("takes no new sessions while the journal is over its bound, and grants credit again once an ack frees it", async () => {
    const { cp, gateway } = await start({ journalMaxBytes: 1 }, { autoAck: false });
    const a = makeAssign({ command: ASK });
    cp.send(a);
    await cp.waitFor(isResultOf(a.lease_id));
    const creditsSince = (n: number) =>
      cp.received.slice(n).filter((r) => r.message.type === "credit" && r.message.grant > 0);
    const mark = cp.received.length;
    // A credit would follow the result as soon as it is journaled; a status request answered
    // after the result proves the gateway got past that point.
    cp.send({ v: WIRE_VERSION, type: "admin", request_id: "after-result", action: "status" });
    await cp.waitFor((m) => m.type === "admin_ack" && m.request_id === "after-result");
    expect(creditsSince(mark)).toEqual([]);
    // What it counts is exactly the one entry on disk (written once per step, counted once).
    const journalDir = path.join(gateway.workRoot, "journal");
    const files = await readdir(journalDir);
    expect(files).toHaveLength(1);
    expect(gateway.stats().journalBytes).toBe((await stat(path.join(journalDir, files[0]!))).size);
    // A reconnect's hello offers nothing either.
    cp.drop();
    const hello = (await cp.waitFor((m, r) => m.type === "hello" && r.connection === 1)) as HelloMessage;
    expect(hello.credit).toBe(0);
    expect(hello.leases.map((l) => l.lease_id)).toEqual([a.lease_id]);
    cp.send({
      v: WIRE_VERSION,
      type: "ack",
      lease_id: a.lease_id,
      session_id: a.session.session_id,
      status: "accepted",
    });
    await cp.waitFor((m, r) => m.type === "credit" && m.grant > 0 && r.connection === 1);
    expect(gateway.stats().journalBytes).toBe(0);
  });

  it("closes a silent socket at the liveness limit after the last frame (3 pings of 1 s), not on a later ping tick", async () => {
    const { cp } = await start({}, { pingIntervalSeconds: 1 });
    await expect.poll(() => cp.pings[0] ?? 0, { timeout: 15_000 }).toBeGreaterThanOrEqual(2); // pings answered
    cp.mute = true;
    await expect.poll(() => cp.closedAt[0] ?? null, { timeout: 10_000 }).not.toBeNull();
    const silentFor = cp.closedAt[0]! - cp.lastSentAt;
    expect(silentFor).toBeGreaterThanOrEqual(2950);
    expect(silentFor).toBeLessThan(3400);
    cp.mute = false;
    await cp.waitFor((m, r) => m.type === "hello" && r.connection === 1);
  });
});

// ResultDelivery on its own, against a scripted upload target and a memory or stub journal.
// The fakes answer without I/O, so once `drained()` (one macrotask turn) resolves, every
// continuation the delivery had queued has run: a negative assertion after it is not a guess.

interface Attempt {
  sessionId: string;
  leaseId: string;
  kind: ArtifactKind;
  body: unknown;
  /** `Date.now()` when the attempt was made. */
  at: number;
  /** Whether the test had the link up at that moment. */
  linkUp: boolean;
}

interface Line {
  level: "info" | "warn" | "error";
  message: string;
  fields: Record<string, unknown>;
}

const drained = () => new Promise<void>((resolve) => setImmediate(resolve));

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const storedAnswer = (a: Attempt): ControlPlaneAnswer => ({
  status: 201,
  text: JSON.stringify({ key: `${a.sessionId}/${a.kind}`, bytes: 1, sha256: "0".repeat(64) }),
});
const unavailable: ControlPlaneAnswer = { status: 503, text: "try later" };

function sessionResult(sessionId: string, trajectory: Partial<Trajectory> = {}): SessionResult {
  return {
    session_id: sessionId,
    task_id: "t1",
    batch_id: "b",
    status: "COMPLETED",
    reward: 1,
    trajectory: { status: "COMPLETED", traces: [], metadata: {}, error: null, ...trajectory },
    timing: { queued_ms: 0, init_ms: 0, ready_ms: 0, run_ms: 0, postrun_ms: 0, total_ms: 0 },
    node_id: "n",
    attempt: 1,
    error: null,
    metadata: {},
  };
}

/** A trace whose JSON alone is over `LIMITS.inlineTrajectoryBytes`. */
function bigTrace(): Trace {
  const ids = new Array<number>(LIMITS.inlineTrajectoryBytes / 2 + 1).fill(7);
  return {
    prompt_ids: ids,
    response_ids: [1],
    loss_mask: [1],
    response_logprobs: null,
    prompt_messages: [],
    response_messages: [],
    tools: null,
    finish_reason: "stop",
    reward: null,
    metadata: {},
  };
}

/** Completion records stay opaque to the delivery: uploaded as they were recorded. */
const records = (tag: unknown) => [{ opaque: tag }] as unknown as CompletionRecord[];

const LOGS: LogsUpload = {
  limit_bytes: 100,
  streams: [{ name: "stdout", bytes_total: 2, bytes_kept: 2, truncated: false, text: "ok" }],
};
const TOKENS: TokenTextUpload = { v: 1, traces: [{ prompt_shared: 0, prompt: ["a"], response: ["b"] }] };

interface RigOptions {
  /** The upload target's answer to the n-th attempt (1-based) of a lease's kind; default: stored. */
  reply?: (a: Attempt, n: number) => ControlPlaneAnswer | Promise<ControlPlaneAnswer>;
  journal?: ResultJournal | null;
  /** false: no upload target (everything inline). */
  upload?: boolean;
  policy?: Partial<UploadPolicy>;
  maxJournalBytes?: number;
}

function rig(o: RigOptions = {}) {
  const attempts: Attempt[] = [];
  const sent: ResultMessage[] = [];
  const lines: Line[] = [];
  /** Leases held at each `onRoom` call. */
  const rooms: string[][] = [];
  let up = false;
  const log =
    (level: Line["level"]) =>
    (message: string, fields: object = {}) =>
      lines.push({ level, message, fields: fields as Record<string, unknown> });
  const logger = { info: log("info"), warn: log("warn"), error: log("error") };
  const http = {
    request(_method: string, where: string, body?: string): Promise<ControlPlaneAnswer> {
      const m = /^\/v1\/sessions\/([^/]+)\/artifacts\/(\w+)\?lease_id=(.+)$/.exec(where)!;
      const a: Attempt = {
        sessionId: decodeURIComponent(m[1]!),
        kind: m[2] as ArtifactKind,
        leaseId: decodeURIComponent(m[3]!),
        body: JSON.parse(body!),
        at: Date.now(),
        linkUp: up,
      };
      attempts.push(a);
      const n = attempts.filter((x) => x.kind === a.kind && x.leaseId === a.leaseId).length;
      return Promise.resolve(o.reply ? o.reply(a, n) : storedAnswer(a));
    },
  } as unknown as ControlPlaneHttp;
  const delivery: ResultDelivery = new ResultDelivery({
    journal: o.journal ?? null,
    upload:
      o.upload === false
        ? null
        : { http, policy: { initialDelayMs: 10, maxDelayMs: 20, concurrency: 4, ...o.policy }, logger },
    ...(o.maxJournalBytes !== undefined ? { maxJournalBytes: o.maxJournalBytes } : {}),
    send(message) {
      sent.push(structuredClone(message));
      return up;
    },
    logger,
    onRoom: () => rooms.push(delivery.held().map((l) => l.lease_id)),
  });
  return {
    delivery,
    attempts,
    sent,
    lines,
    rooms,
    sentLeases: () => sent.map((m) => m.lease_id),
    linkUp() {
      up = true;
      delivery.linkUp();
    },
    linkDown() {
      up = false;
      delivery.linkDown();
    },
  };
}

/** A journal that records what it is asked and answers as the test says. */
function stubJournal(
  o: {
    put?: () => Promise<number>;
    remove?: () => Promise<void>;
    load?: JournalEntry[];
    bytes?: number;
  } = {},
) {
  const puts: JournalEntry[] = [];
  const journal = {
    bytes: o.bytes ?? 0,
    put(entry: JournalEntry) {
      puts.push(structuredClone(entry));
      return o.put ? o.put() : Promise.resolve(1);
    },
    remove: () => (o.remove ? o.remove() : Promise.resolve()),
    load: () => Promise.resolve(o.load ?? []),
  } as unknown as ResultJournal;
  return { journal, puts };
}

/** The size the delivery counts for an entry held in memory. */
const entryBytes = (message: ResultMessage, pending: JournalEntry["pending"], finishedAt: number) =>
  Buffer.byteLength(JSON.stringify({ v: 2, message, pending, finished_at: finishedAt }));

describe("ResultDelivery (unit: scripted upload target)", () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it("holds a result from the add call on, sends nothing until the journal write has settled, then sends it even with the link down", async () => {
    const write = deferred<number>();
    const { journal, puts } = stubJournal({ put: () => write.promise });
    const r = rig({ journal, upload: false });
    const added = r.delivery.add("L1", sessionResult("s.1"), records(1), { logs: LOGS });
    expect(r.delivery.has("L1")).toBe(true);
    expect(r.delivery.held()).toEqual([{ lease_id: "L1", session_id: "s.1" }]);
    // Journaled as it is: no upload target, so nothing pending and the message inline.
    expect(puts).toEqual([
      {
        v: 2,
        message: resultMessage("L1", sessionResult("s.1")),
        pending: {},
        finished_at: expect.any(Number),
      },
    ]);
    expect(r.sent).toEqual([]);
    write.resolve(1);
    await added;
    expect(r.sentLeases()).toEqual(["L1"]);
    expect(r.delivery.sentMessages().map((m) => m.lease_id)).toEqual(["L1"]);
    expect(r.delivery.stats()).toMatchObject({ held: 1, uploading: 0 });
  });

  it("journals as pending exactly what is to upload: records only when there are any, logs, tokens, a trajectory over the inline limit; nothing without an upload target", async () => {
    const { journal, puts } = stubJournal();
    const r = rig({ journal }); // link down: nothing is uploaded
    await r.delivery.add("none", sessionResult("s.none"), []);
    await r.delivery.add("all", sessionResult("s.all", { traces: [bigTrace()] }), records(1), {
      logs: LOGS,
      tokens: TOKENS,
    });
    const inline = stubJournal();
    const r2 = rig({ journal: inline.journal, upload: false });
    await r2.delivery.add("inline", sessionResult("s.inline", { traces: [bigTrace()] }), records(1), {
      logs: LOGS,
      tokens: TOKENS,
    });
    expect(puts.map((e) => e.pending)).toEqual([
      {},
      { completions: [{ opaque: 1 }], logs: LOGS, tokens: TOKENS, trajectory: true },
    ]);
    expect(inline.puts.map((e) => e.pending)).toEqual([{}]);
    expect(r.delivery.stats()).toMatchObject({ held: 2, uploading: 1 });
    expect(r.sentLeases()).toEqual(["none"]);
    expect(r.attempts).toEqual([]);
  });

  it("uploads completions, logs, tokens, then the trajectory, journals after each step, and sends the refs with the trajectory's traces emptied", async () => {
    const { journal, puts } = stubJournal();
    const r = rig({ journal });
    r.linkUp();
    const traj = sessionResult("s.1", { traces: [bigTrace()] }).trajectory;
    await r.delivery.add("L1", sessionResult("s.1", { traces: [bigTrace()] }), records(1), {
      logs: LOGS,
      tokens: TOKENS,
    });
    await expect.poll(() => r.sent.length).toBe(1);
    expect(r.attempts.map((a) => [a.kind, a.body])).toEqual([
      ["completions", [{ opaque: 1 }]],
      ["logs", LOGS],
      ["tokens", TOKENS],
      ["trajectory", traj],
    ]);
    const ref = (kind: string) => ({ key: `s.1/${kind}`, bytes: 1, sha256: "0".repeat(64) });
    expect(r.sent[0]).toEqual({
      ...resultMessage("L1", sessionResult("s.1")),
      completions_ref: ref("completions"),
      logs_ref: ref("logs"),
      tokens_ref: ref("tokens"),
      trajectory_ref: ref("trajectory"),
    });
    // One write when taken, then one after each upload: a restart never repeats a finished upload.
    expect(puts.map((e) => Object.keys(e.pending))).toEqual([
      ["completions", "logs", "tokens", "trajectory"],
      ["logs", "tokens", "trajectory"],
      ["tokens", "trajectory"],
      ["trajectory"],
      [],
    ]);
    expect(puts[1]!.message.completions_ref).toEqual(ref("completions"));
    expect(r.delivery.stats()).toMatchObject({ held: 1, uploading: 0, uploadFailures: 0 });
    expect(r.lines).toEqual([]); // nothing to say about uploads that succeed at once
  });

  it("recover() holds every journaled entry again and returns their count; each is sent once its pending uploads are done (a trajectory marked false is not one)", async () => {
    const done: JournalEntry = {
      v: 2,
      message: resultMessage("old-1", sessionResult("s.old1")),
      pending: { trajectory: false },
      finished_at: 1,
    };
    const uploading: JournalEntry = {
      v: 2,
      message: resultMessage("old-2", sessionResult("s.old2")),
      pending: { completions: [{ opaque: 2 }] },
      finished_at: 2,
    };
    const { journal } = stubJournal({ load: [done, uploading] });
    const r = rig({ journal });
    expect(await r.delivery.recover()).toBe(2);
    expect(r.delivery.held()).toEqual([
      { lease_id: "old-1", session_id: "s.old1" },
      { lease_id: "old-2", session_id: "s.old2" },
    ]);
    expect(r.lines).toContainEqual({
      level: "info",
      message: "journaled results to deliver",
      fields: { count: 2 },
    });
    // Nothing left to upload: sent at once (it goes out again after the welcome).
    expect(r.sentLeases()).toEqual(["old-1"]);
    r.linkUp();
    await expect.poll(() => r.sentLeases()).toEqual(["old-1", "old-1", "old-2"]);
    expect(r.attempts.map((a) => [a.leaseId, a.kind])).toEqual([["old-2", "completions"]]);
    expect(r.sent[2]!.completions_ref).toMatchObject({ key: "s.old2/completions" });
    expect(await rig().delivery.recover()).toBe(0); // no journal
  });

  it("after a reconnect re-sends, in order, only the results already sent, not one whose upload is still in flight", async () => {
    const hang = deferred<ControlPlaneAnswer>();
    const r = rig({ reply: (a) => (a.leaseId === "B" ? hang.promise : storedAnswer(a)) });
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.a"), []);
    await r.delivery.add("B", sessionResult("s.b"), records(1));
    await r.delivery.add("C", sessionResult("s.c"), []);
    await expect.poll(() => r.attempts.length).toBe(1);
    r.linkDown();
    r.linkUp(); // the re-send is synchronous
    expect(r.sentLeases()).toEqual(["A", "C", "A", "C"]);
    hang.resolve(storedAnswer(r.attempts[0]!));
    await expect.poll(() => r.sentLeases()).toEqual(["A", "C", "A", "C", "B"]);
    expect(r.sent[4]!.completions_ref).toBeDefined();
  });

  it("an ack forgets the result (ack of an unknown lease returns false); one acked during its upload is never sent", async () => {
    const hang = deferred<ControlPlaneAnswer>();
    const r = rig({ reply: () => hang.promise });
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.a"), records(1));
    await expect.poll(() => r.attempts.length).toBe(1);
    expect(r.delivery.ack("A")).toBe(true);
    expect(r.delivery.ack("A")).toBe(false);
    expect(r.delivery.ack("never-held")).toBe(false);
    expect(r.delivery.has("A")).toBe(false);
    expect(r.delivery.held()).toEqual([]);
    hang.resolve(storedAnswer(r.attempts[0]!));
    await drained();
    expect(r.sent).toEqual([]);
    r.linkDown();
    r.linkUp();
    await drained();
    expect(r.sent).toEqual([]);
    expect(r.attempts).toHaveLength(1);
  });

  it("a lease taken again after its ack does not revive the acked result's delivery: only the new result is sent", async () => {
    const hang = deferred<ControlPlaneAnswer>();
    const r = rig({ reply: () => hang.promise });
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.first"), records(1));
    await expect.poll(() => r.attempts.length).toBe(1);
    r.delivery.ack("A");
    await r.delivery.add("A", sessionResult("s.second"), []);
    expect(r.sent.map((m) => m.result.session_id)).toEqual(["s.second"]);
    hang.resolve(storedAnswer(r.attempts[0]!));
    await drained();
    expect(r.sent.map((m) => m.result.session_id)).toEqual(["s.second"]);
    expect(r.delivery.held()).toEqual([{ lease_id: "A", session_id: "s.second" }]);
  });

  it("after close() a link coming up neither uploads nor sends; the result stays held for the next start", async () => {
    const r = rig();
    await r.delivery.add("A", sessionResult("s.a"), records(1));
    r.delivery.close();
    r.linkUp();
    await drained();
    expect(r.attempts).toEqual([]);
    expect(r.sent).toEqual([]);
    expect(r.delivery.has("A")).toBe(true);
  });

  it("uploads only while the link is up: a result waiting for a slot when the link goes down waits for the next link", async () => {
    const hang = deferred<ControlPlaneAnswer>();
    const r = rig({
      policy: { concurrency: 1 },
      reply: (a) => (a.leaseId === "A" ? hang.promise : storedAnswer(a)),
    });
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.a"), records(1));
    await r.delivery.add("B", sessionResult("s.b"), records(2));
    await expect.poll(() => r.attempts.length).toBe(1);
    r.linkDown();
    hang.resolve(storedAnswer(r.attempts[0]!)); // frees the slot B waits for, with the link down
    await expect.poll(() => r.sentLeases()).toEqual(["A"]);
    r.linkUp();
    await expect.poll(() => r.sentLeases()).toEqual(["A", "A", "B"]);
    expect(r.attempts.map((a) => [a.leaseId, a.linkUp])).toEqual([
      ["A", true],
      ["B", true],
    ]);
  });

  it("never has more than policy.concurrency uploads in flight (2 of 3 here)", async () => {
    let inFlight = 0;
    let most = 0;
    const answers: Array<() => void> = [];
    const r = rig({
      policy: { concurrency: 2 },
      reply: (a) => {
        inFlight++;
        most = Math.max(most, inFlight);
        return new Promise((resolve) =>
          answers.push(() => {
            inFlight--;
            resolve(storedAnswer(a));
          }),
        );
      },
    });
    r.linkUp();
    for (const l of ["A", "B", "C"]) await r.delivery.add(l, sessionResult(`s.${l}`), records(l));
    for (let answered = 0; answered < 3; answered++) {
      await expect.poll(() => answers.length).toBeGreaterThan(answered);
      answers[answered]!();
    }
    await expect.poll(() => r.sent.length).toBe(3);
    expect(most).toBe(2);
  });

  it("retries after jittered exponential backoff (initial × 2^n × (0.5 + random/2), capped at maxDelayMs), afresh for the next kind", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"], now: 0 });
    vi.spyOn(Math, "random").mockReturnValue(0.5); // jitter factor 0.75
    const r = rig({
      policy: { initialDelayMs: 100, maxDelayMs: 400, concurrency: 1 },
      reply: (a, n) => (n <= (a.kind === "completions" ? 4 : 1) ? unavailable : storedAnswer(a)),
    });
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.a"), records(1), { logs: LOGS });
    await vi.advanceTimersByTimeAsync(2000);
    // Ceilings 100, 200, 400, 400 (capped) → waits 75, 150, 300, 300; the logs start over at 100 → 75.
    expect(r.attempts.map((a) => [a.kind, a.at])).toEqual([
      ["completions", 0],
      ["completions", 75],
      ["completions", 225],
      ["completions", 525],
      ["completions", 825],
      ["logs", 825],
      ["logs", 900],
    ]);
    expect(r.sentLeases()).toEqual(["A"]);
    expect(r.delivery.stats().uploadFailures).toBe(5);
    expect(r.lines.filter((l) => l.message === "upload done after retries").map((l) => l.fields)).toEqual([
      { session_id: "s.a", kind: "completions", failures: 4 },
      { session_id: "s.a", kind: "logs", failures: 1 },
    ]);
  });

  it("a reconnect retries at once, however long the backoff, and cancels the backoff's timer", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"], now: 0 });
    const r = rig({
      policy: { initialDelayMs: 3_600_000, maxDelayMs: 3_600_000 },
      reply: (a, n) => (n === 1 ? unavailable : storedAnswer(a)),
    });
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.a"), records(1));
    await vi.advanceTimersByTimeAsync(0);
    expect(r.attempts).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(1); // the backoff
    r.linkDown();
    r.linkUp();
    await vi.advanceTimersByTimeAsync(0);
    expect(r.attempts.map((a) => a.at)).toEqual([0, 0]);
    expect(r.sentLeases()).toEqual(["A"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("logs a retried upload's failure at the first failure and then every tenth (1, 11, 21), with the count", async () => {
    const r = rig({
      policy: { initialDelayMs: 0, maxDelayMs: 0 },
      reply: (a, n) => (n <= 21 ? unavailable : storedAnswer(a)),
    });
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.a"), records(1));
    await expect.poll(() => r.sent.length).toBe(1);
    expect(r.attempts).toHaveLength(22);
    const warned = r.lines.filter((l) => l.message === "upload failed; kept in the journal and retried");
    expect(warned.map((l) => l.fields)).toEqual(
      [1, 11, 21].map((failures) => ({
        session_id: "s.a",
        kind: "completions",
        failures,
        error: "HTTP 503: try later",
      })),
    );
  });

  it("an upload refused for good (4xx) is not retried: records go without a ref and the trajectory inline, the reason in the metadata; the next kind still uploads", async () => {
    const r = rig({
      reply: (a) =>
        a.kind === "completions"
          ? { status: 413, text: "too large" }
          : a.kind === "trajectory"
            ? { status: 400, text: "no" }
            : storedAnswer(a),
    });
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.a"), records(1), { logs: LOGS });
    await r.delivery.add("B", sessionResult("s.b", { traces: [bigTrace()] }), []);
    await expect.poll(() => r.sent.length).toBe(2);
    expect(r.attempts.map((a) => [a.leaseId, a.kind])).toEqual([
      ["A", "completions"],
      ["B", "trajectory"],
      ["A", "logs"],
    ]);
    const a = r.sent.find((m) => m.lease_id === "A")!;
    expect(a.completions_ref).toBeUndefined();
    expect(a.logs_ref).toMatchObject({ key: "s.a/logs" });
    expect(a.result.trajectory.metadata).toEqual({ completions_upload_error: "HTTP 413: too large" });
    const b = r.sent.find((m) => m.lease_id === "B")!;
    expect(b.trajectory_ref).toBeUndefined();
    expect(b.result.trajectory.traces).toEqual([bigTrace()]);
    expect(b.result.trajectory.metadata).toEqual({ trajectory_upload_error: "HTTP 400: no" });
    expect(r.delivery.stats().uploadFailures).toBe(2);
    expect(
      r.lines
        .filter((l) => l.level === "warn")
        .map((l) => l.message)
        .sort(),
    ).toEqual([
      "completions refused by the control plane; result sent without them",
      "trajectory upload refused; sending it inline",
    ]);
  });

  it("a result over the wire limit goes as an infra error that says why, and a reconnect re-sends that form", async () => {
    const r = rig({ upload: false });
    const huge = "x".repeat(LIMITS.maxWireMessageBytes);
    await r.delivery.add("A", sessionResult("s.a", { metadata: { huge } }), []);
    expect(r.sent).toHaveLength(1);
    const m = r.sent[0]!;
    expect(m.result.status).toBe("ERROR");
    expect(m.result.trajectory).toMatchObject({ status: "ERROR", traces: [] });
    expect(m.result.error).toEqual({
      kind: "infra",
      message: expect.stringMatching(/exceeds the wire limit/),
    });
    r.linkUp();
    expect(r.sent).toHaveLength(2);
    expect(r.sent[1]).toEqual(m);
  });

  it("without a journal counts each result's bytes as last written (not the sum of its writes) and frees them on ack", async () => {
    vi.spyOn(Date, "now").mockReturnValue(1_700_000_000_000);
    const r = rig();
    r.linkUp();
    await r.delivery.add("A", sessionResult("s.a"), records(1));
    await expect.poll(() => r.sent.length).toBe(1);
    expect(r.delivery.stats().journalBytes).toBe(entryBytes(r.sent[0]!, {}, 1_700_000_000_000));
    r.delivery.ack("A");
    expect(r.delivery.stats().journalBytes).toBe(0);
  });

  it("is full at exactly its bound, and calls onRoom only on an ack that brings it from full to under", async () => {
    vi.spyOn(Date, "now").mockReturnValue(1_700_000_000_000);
    const one = entryBytes(resultMessage("A", sessionResult("s.a")), {}, 1_700_000_000_000);
    const r = rig({ upload: false, maxJournalBytes: 2 * one });
    await r.delivery.add("A", sessionResult("s.a"), []);
    expect(r.delivery.full()).toBe(false);
    await r.delivery.add("B", sessionResult("s.b"), []);
    expect(r.delivery.stats().journalBytes).toBe(2 * one);
    expect(r.delivery.full()).toBe(true);
    await r.delivery.add("C", sessionResult("s.c"), []);
    r.delivery.ack("A"); // 3 → 2 entries: still full, no call
    await drained();
    expect(r.rooms).toEqual([]);
    r.delivery.ack("B"); // full → under: room
    await expect.poll(() => r.rooms.length).toBeGreaterThanOrEqual(1);
    expect(r.rooms).toEqual([["C"]]);
    r.delivery.ack("C"); // under already: no call
    await r.delivery.add("D", sessionResult("s.d"), []);
    await r.delivery.add("E", sessionResult("s.e"), []);
    expect(r.delivery.full()).toBe(true);
    r.delivery.ack("D"); // full → under again
    // Acks' callbacks run in the order of the acks: one for C would come before D's.
    await expect.poll(() => r.rooms.length).toBeGreaterThanOrEqual(2);
    expect(r.rooms).toEqual([["C"], ["E"]]);
  });

  it("bounds a journal at DEFAULT_JOURNAL_MAX_BYTES (1 GiB) of its own count when no bound is given", () => {
    expect(DEFAULT_JOURNAL_MAX_BYTES).toBe(1024 ** 3);
    expect(rig({ journal: stubJournal({ bytes: 1024 ** 3 }).journal }).delivery.full()).toBe(true);
    expect(rig({ journal: stubJournal({ bytes: 1024 ** 3 - 1 }).journal }).delivery.full()).toBe(false);
    expect(rig({ journal: stubJournal({ bytes: 5 }).journal }).delivery.stats().journalBytes).toBe(5);
  });

  it("with a real journal, calls onRoom once the ack's file removal has brought the journal under its bound", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "polar-delivery-unit-"));
    try {
      const journal = new ResultJournal(path.join(dir, "journal"), quiet);
      const r = rig({ journal, upload: false, maxJournalBytes: 1 });
      await r.delivery.add("A", sessionResult("s.a"), []);
      expect(r.delivery.full()).toBe(true);
      r.delivery.ack("A");
      await expect.poll(() => r.rooms).toEqual([[]]);
      expect(journal.bytes).toBe(0);
      expect(await readdir(path.join(dir, "journal"))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a failed journal write is logged and the result delivered anyway; a failed removal on ack is logged", async () => {
    const { journal } = stubJournal({
      put: () => Promise.reject(new Error("disk full")),
      remove: () => Promise.reject(new Error("read-only")),
    });
    const r = rig({ journal, upload: false });
    await r.delivery.add("A", sessionResult("s.a"), []);
    expect(r.sentLeases()).toEqual(["A"]);
    expect(r.lines).toContainEqual({
      level: "error",
      message: "journal write failed",
      fields: { lease_id: "A", error: "disk full" },
    });
    expect(r.delivery.ack("A")).toBe(true);
    await expect
      .poll(() => r.lines.filter((l) => l.message === "journal remove failed"))
      .toEqual([
        { level: "warn", message: "journal remove failed", fields: { lease_id: "A", error: "read-only" } },
      ]);
  });

  it("a send that throws is logged with the lease, not left as an unhandled rejection", async () => {
    const lines: Line[] = [];
    const delivery = new ResultDelivery({
      journal: null,
      upload: null,
      send() {
        throw new Error("socket exploded");
      },
      logger: {
        info() {},
        warn() {},
        error: (message, fields) =>
          lines.push({ level: "error", message, fields: fields as Record<string, unknown> }),
      },
    });
    await delivery.add("A", sessionResult("s.a"), []);
    expect(lines).toEqual([
      {
        level: "error",
        message: "result delivery failed",
        fields: { lease_id: "A", error: "socket exploded" },
      },
    ]);
  });
});
