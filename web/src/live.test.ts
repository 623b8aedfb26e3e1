import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { follow, type LiveState } from "./live";

/**
 * An SSE server of events 1..6 that drops the connection after every 2 events and resumes from
 * `Last-Event-ID`; `/missing` answers the Worker's JSON 404 for an unknown route.
 */
let server: Server;
let base: string;
const seen: Array<{ auth: string | undefined; lastId: string | undefined }> = [];
const logSeen: string[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url?.startsWith("/log")) {
      // A bounded log at head 7: a JSON page for the cursor, 410 for a cursor older than 5.
      const lastId = req.headers["last-event-id"] as string | undefined;
      logSeen.push(`${req.headers.accept} ${req.url} ${lastId ?? "-"}`);
      if (req.headers.accept !== "text/event-stream") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ events: [], next: 7, head: 7 }));
        return;
      }
      if (Number(lastId) < 5) {
        res.writeHead(410, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { code: "events_expired", message: "older than the log" } }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`id: 8\nevent: gateway\ndata: {}\n\nevent: done\ndata: {}\n\n`);
      return;
    }
    if (req.url !== "/events") {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { code: "not_found", message: `no route for GET ${req.url}` } }));
      return;
    }
    const lastId = req.headers["last-event-id"] as string | undefined;
    seen.push({ auth: req.headers.authorization, lastId });
    const from = Number(lastId ?? 0) + 1;
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (let id = from; id < from + 2 && id <= 6; id++)
      res.write(`id: ${id}\nevent: tick\ndata: {"n":${id}}\n\n`);
    if (from + 1 >= 6) res.write("event: done\ndata: {}\n\n");
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe("follow (SSE over fetch)", () => {
  it("resumes a dropped stream with Last-Event-ID, losing and repeating nothing, until the end event", async () => {
    const got: number[] = [];
    const states: LiveState["kind"][] = [];
    await follow({
      path: `${base}/events`,
      token: "tok",
      endEvent: "done",
      retryMs: 10,
      signal: new AbortController().signal,
      onEvent: (e) => {
        if (e.event === "tick") got.push((JSON.parse(e.data) as { n: number }).n);
      },
      onState: (s) => states.push(s.kind),
    });
    expect(got).toEqual([1, 2, 3, 4, 5, 6]);
    expect(seen.map((s) => s.lastId)).toEqual([undefined, "2", "4"]);
    expect(seen.every((s) => s.auth === "Bearer tok")).toBe(true);
    expect(states).toContain("retrying");
    expect(states.at(-1)).toBe("ended");
  });

  it("reports a route the control plane does not have, and stops", async () => {
    const states: LiveState["kind"][] = [];
    await follow({
      path: `${base}/missing`,
      token: "tok",
      signal: new AbortController().signal,
      onEvent: () => {},
      onState: (s) => states.push(s.kind),
    });
    expect(states).toEqual(["connecting", "missing"]);
  });

  it("starts at the log's head, and after a 410 for an expired cursor resumes from the head again", async () => {
    const got: string[] = [];
    const states: LiveState["kind"][] = [];
    await follow({
      path: `${base}/log?kinds=gateway`,
      token: "tok",
      after: "2",
      fromHead: true,
      endEvent: "done",
      signal: new AbortController().signal,
      onEvent: (e) => got.push(`${e.id ?? "-"} ${e.event}`),
      onState: (s) => states.push(s.kind),
    });
    // The given cursor 2 is expired: 410, then the head (7) from the JSON page, then the stream.
    expect(logSeen).toEqual([
      "text/event-stream /log?kinds=gateway 2",
      "application/json /log?kinds=gateway&limit=1 -",
      "text/event-stream /log?kinds=gateway 7",
    ]);
    expect(states).toContain("expired");
    expect(got).toEqual(["8 gateway", "- done"]);
  });
});
