/**
 * Every request of the TypeScript client ends within its deadline, and a 2xx whose body is empty
 * or short is an error — against a raw TCP server that accepts and then answers each path its own
 * broken way (never, an empty 200, a body shorter than its Content-Length).
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_FENCE_TIMEOUT_SECONDS } from "../../protocol";
import {
  createPolarClient,
  deadlineFor,
  PAUSE_DEFAULT_TIMEOUT_SECONDS,
  PolarRequestError,
  unwrap,
} from "./src/index";

const RECORDS = '[{"completion_id":"c1"}]';

/** What the server sends for a request line's path (null: nothing, ever). */
function answerFor(path: string): string | null {
  if (path.includes("/completions") && path.includes("empty-length"))
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n";
  if (path.includes("/completions") && path.includes("empty-chunked"))
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
  if (path.includes("/completions") && path.includes("short"))
    return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n${RECORDS.slice(0, 10)}`;
  if (path.includes("/completions") && path.includes("whole"))
    return `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${RECORDS.length}\r\n\r\n${RECORDS}`;
  return null;
}

let server: net.Server;
let base: string;
const sockets = new Set<net.Socket>();

beforeAll(async () => {
  server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    socket.once("data", (chunk) => {
      const path = chunk.toString("latin1").split(" ")[1] ?? "";
      const answer = answerFor(path);
      // A short body: the connection ends after it, as when a stream is cut mid-answer.
      if (answer !== null) socket.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => server.close(resolve));
});

async function rejection(pending: Promise<unknown>): Promise<PolarRequestError> {
  const err = await pending.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PolarRequestError);
  return err as PolarRequestError;
}

describe("request deadlines", () => {
  it("fails a request the server never answers after timeoutMs, naming the URL and the deadline", async () => {
    const polar = createPolarClient({ baseUrl: base, token: "t", timeoutMs: 300 });
    const started = Date.now();
    const err = await rejection(
      unwrap(polar.api.GET("/v1/batches/{id}", { params: { path: { id: "b1" } } })),
    );
    const took = Date.now() - started;
    expect(err.code).toBe("timeout");
    expect(err.deadlineMs).toBe(300);
    expect(err.message).toBe(
      `GET ${base}/v1/batches/b1: no complete answer within 300 ms (the request's deadline: timeoutMs, plus holdMarginMs over a wait)`,
    );
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(3_000);
  });

  it("gives a long-poll its wait plus the margin, not the short default", async () => {
    const polar = createPolarClient({ baseUrl: base, token: "t", timeoutMs: 200, holdMarginMs: 300 });
    const started = Date.now();
    const err = await rejection(
      unwrap(
        polar.api.GET("/v1/batches/{id}/results", {
          params: { path: { id: "b1" }, query: { after: "0", wait: "1" } },
        }),
      ),
    );
    expect(err.code).toBe("timeout");
    expect(err.deadlineMs).toBe(1_300);
    expect(err.url).toBe(`${base}/v1/batches/b1/results?after=0&wait=1`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_280);
  });

  it("holds a pause for its timeout_seconds (the server's default when it gives none) plus the margin", async () => {
    const pause = (body: string) =>
      new Request(`${base}/v1/queues/default/inference/pause`, { method: "POST", body });
    const opts = { timeoutMs: 1_000, holdMarginMs: 500 };
    expect(await deadlineFor(pause('{"mode":"drain","timeout_seconds":60}'), opts)).toBe(60_500);
    expect(await deadlineFor(pause("{}"), opts)).toBe(300_500);
    expect(await deadlineFor(pause('{"timeout_seconds":0}'), opts)).toBe(1_000);
    expect(PAUSE_DEFAULT_TIMEOUT_SECONDS).toBe(DEFAULT_FENCE_TIMEOUT_SECONDS);
    expect(() => createPolarClient({ baseUrl: base, token: "t", timeoutMs: 0 })).toThrow(
      "timeoutMs must be a number of milliseconds > 0, got 0",
    );
  });
});

describe("an empty or short 2xx body is an error, never 'no completions'", () => {
  const completions = (id: string) =>
    unwrap(
      createPolarClient({ baseUrl: base, token: "t", timeoutMs: 5_000 }).api.GET(
        "/v1/sessions/{id}/completions",
        { params: { path: { id } } },
      ),
    );

  it("refuses an empty 200, with Content-Length: 0 or chunked", async () => {
    for (const id of ["empty-length.0.0", "empty-chunked.0.0"]) {
      const err = await rejection(completions(id));
      expect(err.code).toBe("empty_body");
      expect(err.message).toBe(
        `GET ${base}/v1/sessions/${id}/completions: the 200 answer has an empty body (a document was expected)`,
      );
    }
  });

  it("refuses a body shorter than its Content-Length", async () => {
    const err = await rejection(completions("short.0.0"));
    expect(err.code).toBe("truncated_body");
    expect(err.message).toContain(`GET ${base}/v1/sessions/short.0.0/completions: the 200 answer`);
  });

  it("hands on a whole answer", async () => {
    expect(await completions("whole.0.0")).toEqual([{ completion_id: "c1" }]);
  });
});
