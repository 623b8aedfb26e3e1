/**
 * The state-event stream end to end: `wrangler dev` (Worker and Durable Objects in workerd), a
 * real gateway running shell sessions, and a viewer reading `GET /v1/events` as SSE while the
 * batch runs: it sees each session's transitions and the batch finish, drops the connection
 * mid-batch and resumes with `Last-Event-ID`, with no event missed or repeated.
 */
import { join } from "node:path";
import type { EventSourceMessage } from "eventsource-parser";
import { EventSourceParserStream } from "eventsource-parser/stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";

let stack: LocalStack;

beforeAll(async () => {
  stack = await startLocalStack({ gateways: 1 });
});

afterAll(async () => {
  await stack?.stop();
});

/** Opens the batch's event stream as the viewer, resuming after `lastEventId` when given. */
async function openStream(batchId: string, lastEventId?: string) {
  const controller = new AbortController();
  const res = await fetch(`${stack.controlPlane.url}/v1/events?batch_id=${batchId}`, {
    headers: {
      Accept: "text/event-stream",
      Authorization: `Bearer ${stack.tokens.viewer}`,
      ...(lastEventId ? { "Last-Event-ID": lastEventId } : {}),
    },
    signal: controller.signal,
  });
  expect(res.status).toBe(200);
  const reader = res
    .body!.pipeThrough(new TextDecoderStream())
    .pipeThrough(new EventSourceParserStream())
    .getReader();
  return {
    /** The next event; null when the stream ended. */
    async next(): Promise<EventSourceMessage | null> {
      const { value, done } = await reader.read();
      return done ? null : value;
    },
    drop() {
      controller.abort();
    },
  };
}

const finished = (e: EventSourceMessage) =>
  e.event === "batch" && (JSON.parse(e.data) as { status: string }).status === "completed";

describe("GET /v1/events during a batch", () => {
  it("streams each session's transitions and the batch finish, and resumes without a gap or a duplicate", async () => {
    const batchId = `events-e2e-${Date.now()}`;
    const received: EventSourceMessage[] = [];
    let stream = await openStream(batchId);
    // The hello example (one model call through the proxy, scored), two sessions of it.
    const hello = loadTaskFile(join(REPO_ROOT, "examples/hello/task.yaml"));
    const submitted = await stack.client.submit({
      batch_id: batchId,
      tasks: hello.tasks.map((t) => ({ ...t, num_samples: 2 })),
    });
    expect(submitted.batch_id).toBe(batchId);
    let dropped = false;
    for (;;) {
      const event = await stream.next();
      expect(event, "the stream ended before the batch finished").not.toBeNull();
      received.push(event!);
      if (finished(event!)) break;
      // Drop the connection mid-batch, once, and resume from the last id seen.
      if (!dropped && received.length === 3) {
        dropped = true;
        stream.drop();
        stream = await openStream(batchId, event!.id);
      }
    }
    stream.drop();
    expect(dropped).toBe(true);

    // Nothing missed, nothing repeated: the same events, in order, as the JSON page of the log.
    const res = await fetch(`${stack.controlPlane.url}/v1/events?batch_id=${batchId}&after=0&limit=1000`, {
      headers: { Authorization: `Bearer ${stack.tokens.viewer}` },
    });
    const page = (await res.json()) as { events: { seq: number; kind: string }[] };
    const upToFinish = page.events.slice(0, received.length);
    expect(received.map((e) => Number(e.id))).toEqual(upToFinish.map((e) => e.seq));
    expect(received.map((e) => e.event)).toEqual(upToFinish.map((e) => e.kind));

    const bySession = new Map<string, string[]>();
    for (const e of received.filter((x) => x.event === "session")) {
      const data = JSON.parse(e.data) as { session_id: string; status: string; node_id: string | null };
      bySession.set(data.session_id, [...(bySession.get(data.session_id) ?? []), data.status]);
    }
    expect([...bySession.keys()].sort()).toEqual([`${batchId}.0.0`, `${batchId}.0.1`]);
    for (const statuses of bySession.values()) {
      expect(statuses[0]).toBe("ASSIGNED");
      expect(statuses).toContain("RUNNING");
      expect(statuses.at(-1)).toBe("COMPLETED");
    }
    const last = JSON.parse(received.at(-1)!.data) as { counts: Record<string, number>; total: number };
    expect(last).toMatchObject({ total: 2, counts: { COMPLETED: 2 }, mean_reward: 1 });
  });
});
