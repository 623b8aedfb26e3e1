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
  retriesOnStaleSocket,
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

describe("a kept-alive connection the server closed as the request went out", () => {
  // A server that closes a connection without answering whenever `closeNext` says so, as a
  // control plane does with an idle kept-alive connection the client reuses at that moment
  // (undici: UND_ERR_SOCKET "other side closed").
  let stale: net.Server;
  let url: string;
  let closeNext = 0;
  const seen: string[] = [];
  beforeAll(async () => {
    stale = net.createServer((socket) => {
      socket.on("error", () => {});
      socket.once("data", (chunk) => {
        const [method, path] = chunk.toString("latin1").split(" ");
        seen.push(`${method} ${path}`);
        if (closeNext > 0) {
          closeNext -= 1;
          socket.destroy();
          return;
        }
        const body = '{"batch_id":"b1"}';
        socket.end(
          `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
        );
      });
    });
    await new Promise<void>((resolve) => stale.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(stale.address() as net.AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => stale.close(resolve));
  });

  const api = () => createPolarClient({ baseUrl: url, token: "t", timeoutMs: 5_000 }).api;
  const run = async (closes: number, send: () => Promise<unknown>) => {
    closeNext = closes;
    seen.length = 0;
    return send();
  };

  it("a GET is sent once more on a new connection and its answer handed on", async () => {
    const answer = await run(1, () =>
      unwrap(api().GET("/v1/batches/{id}", { params: { path: { id: "b1" } } })),
    );
    expect(answer).toEqual({ batch_id: "b1" });
    expect(seen).toEqual(["GET /v1/batches/b1", "GET /v1/batches/b1"]);
  });

  it("a batch created with its own batch_id is sent once more (a replay of the same batch)", async () => {
    const body = { batch_id: "b1", tasks: [] } as never;
    expect(await run(1, () => unwrap(api().POST("/v1/batches", { body })))).toEqual({ batch_id: "b1" });
    expect(seen).toEqual(["POST /v1/batches", "POST /v1/batches"]);
  });

  it("a batch without a batch_id is never sent twice: the error says the connection failed", async () => {
    const body = { tasks: [] } as never;
    const err = await rejection(run(1, () => unwrap(api().POST("/v1/batches", { body }))));
    expect(err.code).toBe("connection_failed");
    expect(err.message).toContain(`POST ${url}/v1/batches: no answer:`);
    expect(seen).toEqual(["POST /v1/batches"]);
  });

  it("once only: a second closed connection is the error", async () => {
    const err = await rejection(
      run(2, () => unwrap(api().GET("/v1/batches/{id}", { params: { path: { id: "b1" } } }))),
    );
    expect(err.code).toBe("connection_failed");
    expect(seen).toEqual(["GET /v1/batches/b1", "GET /v1/batches/b1"]);
  });

  it("which requests may be repeated", async () => {
    const req = (method: string, path: string, body?: unknown) =>
      new Request(`http://cp${path}`, {
        method,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    expect(await retriesOnStaleSocket(req("GET", "/v1/batches/b1"))).toBe(true);
    expect(await retriesOnStaleSocket(req("DELETE", "/v1/batches/b1"))).toBe(true);
    expect(await retriesOnStaleSocket(req("PUT", "/v1/sessions/s/artifacts/a"))).toBe(true);
    expect(await retriesOnStaleSocket(req("POST", "/v1/batches", { batch_id: "b1" }))).toBe(true);
    expect(await retriesOnStaleSocket(req("POST", "/v1/batches", { batch_id: "" }))).toBe(false);
    expect(await retriesOnStaleSocket(req("POST", "/v1/batches", { tasks: [] }))).toBe(false);
    expect(await retriesOnStaleSocket(req("POST", "/v1/batches", "not json"))).toBe(false);
    expect(await retriesOnStaleSocket(req("POST", "/v1/queues/q/inference/pause", {}))).toBe(false);
  });
});
