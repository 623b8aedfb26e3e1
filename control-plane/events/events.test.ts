import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { EventSourceMessage } from "eventsource-parser";
import { EventSourceParserStream } from "eventsource-parser/stream";
import { afterEach, describe, expect, it } from "vitest";
import { ErrorBody } from "../../protocol";
import { app } from "../app";
import { call, Gateway, POLL, postBatch, resultFor, TOKENS, task, uniqueId } from "../testing/fixtures";
import type { EventsDO } from "./events-do";
import { EVENTS_NAME } from "./events-do";

interface PageEvent {
  seq: number;
  kind: string;
  at: number;
  data: Record<string, unknown>;
}
interface Page {
  events: PageEvent[];
  next: number;
  head: number;
}

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

const asViewer = (init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { Authorization: `Bearer ${TOKENS.viewer}`, ...init.headers },
});

async function page(query: string): Promise<Page> {
  const res = await call(`/v1/events?${query}`, asViewer());
  expect(res.status).toBe(200);
  return (await res.json()) as Page;
}

/** Every event of `batchId` in the log, once `done` holds for them (the flush is asynchronous). */
async function eventsUntil(batchId: string, done: (events: PageEvent[]) => boolean): Promise<PageEvent[]> {
  let events: PageEvent[] = [];
  await expect
    .poll(
      async () => {
        events = (await page(`batch_id=${batchId}&limit=1000`)).events;
        return done(events);
      },
      { timeout: 10_000 },
    )
    .toBe(true);
  return events;
}

/** Runs one session of a fresh batch on queue `queue` through its stages to COMPLETED. */
async function runOneSession(queue: string, batchId: string, nodeId: string) {
  expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t0")] })).status).toBe(201);
  const gw = await Gateway.connect(queue);
  open.push(gw);
  gw.hello(nodeId, 1);
  await gw.expect("welcome");
  const assign = await gw.expect("assign");
  for (const status of ["INITIALIZING", "RUNNING"]) {
    gw.send({
      v: 1,
      type: "progress",
      lease_id: assign.lease_id,
      session_id: assign.session.session_id,
      status,
      at: Date.now(),
    });
    // Stages reach the ledger through the dispatcher concurrently: one at a time keeps their order.
    await expect
      .poll(async () => (await env.BATCH.getByName(batchId).session(assign.session.session_id))?.status, POLL)
      .toBe(status);
  }
  gw.send({ v: 1, type: "result", lease_id: assign.lease_id, result: resultFor(assign.session, nodeId) });
  expect((await gw.expect("ack")).status).toBe("accepted");
  return { gw, sessionId: assign.session.session_id };
}

const finished = (events: PageEvent[]) =>
  events.some((e) => e.kind === "batch" && e.data.status === "completed");

describe("GET /v1/events", () => {
  it("logs a session's transitions in order and the batch from creation to finish", async () => {
    const queue = uniqueId("evq");
    const batchId = uniqueId("ev");
    const { sessionId } = await runOneSession(queue, batchId, "node-ev");
    const events = await eventsUntil(batchId, finished);
    const seqs = events.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    const sessions = events.filter((e) => e.kind === "session");
    expect(sessions.map((e) => e.data.status)).toEqual(["ASSIGNED", "INITIALIZING", "RUNNING", "COMPLETED"]);
    expect(sessions[0]!.data).toMatchObject({
      batch_id: batchId,
      task_id: "t0",
      session_id: sessionId,
      stage: "ASSIGNED",
      node_id: "node-ev",
      attempt: 1,
      reward: null,
    });
    expect(sessions[3]!.data).toMatchObject({ stage: null, reward: 1, error_kind: null });
    const batches = events.filter((e) => e.kind === "batch");
    expect(batches[0]!.data).toMatchObject({
      batch_id: batchId,
      status: "running",
      total: 1,
      mean_reward: null,
    });
    expect(batches[0]!.data.counts).toEqual({ QUEUED: 1 });
    expect(batches.at(-1)!.data).toMatchObject({
      status: "completed",
      mean_reward: 1,
      counts: { COMPLETED: 1 },
    });
    // The batch event follows the session events it counts.
    expect(events.at(-1)!.kind).toBe("batch");
  });

  it("filters by kind and continues a short page from the head, past skipped events", async () => {
    const queue = uniqueId("evk");
    const batchId = uniqueId("evk");
    await runOneSession(queue, batchId, "node-evk");
    await eventsUntil(batchId, finished);
    const onlyBatch = await page(`batch_id=${batchId}&kinds=batch`);
    expect(onlyBatch.events.length).toBeGreaterThan(0);
    expect(onlyBatch.events.every((e) => e.kind === "batch")).toBe(true);
    expect(onlyBatch.next).toBe(onlyBatch.head);
    const paged = await page(`batch_id=${batchId}&limit=2`);
    expect(paged.events).toHaveLength(2);
    expect(paged.next).toBe(paged.events[1]!.seq);
    const rest = await page(`batch_id=${batchId}&after=${paged.next}&limit=1000`);
    expect(rest.events[0]!.seq).toBeGreaterThan(paged.next);
  });

  it("logs gateway connect and disconnect, and fence changes", async () => {
    const queue = uniqueId("evg");
    const gw = await Gateway.connect(queue);
    gw.hello("node-evg", 2);
    await gw.expect("welcome");
    const pause = call(`/v1/queues/${queue}/inference/pause`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKENS.trainer}`, "Content-Type": "application/json" },
      body: JSON.stringify({ mode: "drain", timeout_seconds: 0 }),
    });
    const admin = await gw.expect("admin");
    gw.send({
      v: 1,
      type: "admin_ack",
      request_id: admin.request_id,
      ok: true,
      paused: true,
      inflight: 0,
      policy_version: null,
    });
    expect((await pause).status).toBe(200);
    gw.close();
    let gateway: PageEvent[] = [];
    let fence: PageEvent[] = [];
    await expect
      .poll(
        async () => {
          const all = (await page("kinds=gateway,fence&limit=1000")).events;
          gateway = all.filter((e) => e.kind === "gateway" && e.data.node_id === "node-evg");
          fence = all.filter((e) => e.kind === "fence" && e.data.queue === queue);
          return gateway.some((e) => e.data.connected === false) && fence.length > 0;
        },
        { timeout: 10_000 },
      )
      .toBe(true);
    expect(gateway[0]!.data).toMatchObject({
      queue,
      shard: queue,
      connected: true,
      draining: false,
      paused: false,
    });
    expect(gateway.some((e) => e.data.paused === true)).toBe(true);
    expect(fence[0]!.data).toMatchObject({ queue, paused: true, mode: "drain", fence_seq: 1 });
  });

  it("streams SSE with ids, resumes after Last-Event-ID without a gap or a duplicate", async () => {
    const queue = uniqueId("evs");
    const batchId = uniqueId("evs");
    await runOneSession(queue, batchId, "node-evs");
    const all = await eventsUntil(batchId, finished);
    const read = async (headers: Record<string, string>, count: number) => {
      const res = await call(
        `/v1/events?batch_id=${batchId}`,
        asViewer({ headers: { Accept: "text/event-stream", ...headers } }),
      );
      expect(res.status).toBe(200);
      expect(res.headers.get("Content-Type")).toContain("text/event-stream");
      const reader = res
        .body!.pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream())
        .getReader();
      const got: EventSourceMessage[] = [];
      while (got.length < count) {
        const { value, done } = await reader.read();
        if (done) break;
        got.push(value);
      }
      await reader.cancel();
      return got;
    };
    const first = await read({}, 2);
    expect(first.map((e) => Number(e.id))).toEqual([all[0]!.seq, all[1]!.seq]);
    expect(first[0]!.event).toBe(all[0]!.kind);
    expect(JSON.parse(first[0]!.data)).toEqual(all[0]!.data);
    const rest = await read({ "Last-Event-ID": first[1]!.id! }, all.length - 2);
    expect([...first, ...rest].map((e) => Number(e.id))).toEqual(all.map((e) => e.seq));
  });

  it("sends a heartbeat comment on an idle stream", async () => {
    const head = (await page("limit=1")).head;
    const res = await app.request(
      `/v1/events?stream=1&after=${head}&batch_id=${uniqueId("idle")}`,
      asViewer(),
      { ...env, POLAR_EVENTS_HEARTBEAT_SECONDS: "0.2" },
    );
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while ((text.match(/: heartbeat/g) ?? []).length < 2) text += (await reader.read()).value ?? "";
    await reader.cancel();
    expect(text).toMatch(/^: heartbeat\n\n: heartbeat\n\n/);
  });

  it("answers 410 events_expired for a cursor older than the bounded log", async () => {
    const log = env.EVENTS.getByName(EVENTS_NAME);
    await runInDurableObject(log, (instance: EventsDO) => {
      instance.limit = 3;
    });
    const source = uniqueId("src");
    const items = Array.from({ length: 6 }, (_, i) => ({
      id: i + 1,
      kind: "batch" as const,
      batch_id: source,
      at: Date.now(),
      data: JSON.stringify({ n: i }),
    }));
    await log.append(source, items);
    // A resend of ids already logged is skipped.
    await log.append(source, items.slice(4));
    const kept = await page(`batch_id=${source}`);
    expect(kept.events.map((e) => e.data.n)).toEqual([3, 4, 5]);
    const res = await call("/v1/events?after=1", asViewer());
    expect(res.status).toBe(410);
    const body = ErrorBody.parse(await res.json());
    expect(body.error.code).toBe("events_expired");
    await runInDurableObject(log, (instance: EventsDO) => {
      instance.limit = 20_000;
    });
  });

  it("refuses a bad kinds or after parameter (400 naming it) and a missing token (401)", async () => {
    const kinds = await call("/v1/events?kinds=batch,nope", asViewer());
    expect(kinds.status).toBe(400);
    expect(ErrorBody.parse(await kinds.json()).error.message).toMatch(/^kinds:/);
    const after = await call("/v1/events?after=-1", asViewer());
    expect(after.status).toBe(400);
    expect(ErrorBody.parse(await after.json()).error.message).toMatch(/^after:/);
    expect((await call("/v1/events")).status).toBe(401);
  });
});
