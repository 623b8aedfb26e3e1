/**
 * `ControlPlaneClient.streamResults` against a raw HTTP server that drops the first page reads
 * unanswered: a read without a usable answer is read again from the same cursor, and only a run
 * of failures longer than `STREAM_READ_RETRIES` reaches the caller.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ControlPlaneClient, PolarRequestError, STREAM_READ_RETRIES } from "./client";

const result = (seq: number) => ({
  seq,
  result: {
    session_id: `b.0.${seq}`,
    batch_id: "b",
    task_id: "t",
    status: "COMPLETED",
    reward: 1,
    trajectory: { status: "COMPLETED", traces: [], metadata: {}, error: null },
    timing: {},
    node_id: "gpu-0",
    attempt: 1,
    error: null,
    metadata: {},
  },
});

let server: http.Server | null = null;

/** A server that leaves the first `silent` results reads unanswered, then serves two pages. */
async function serve(silent: number): Promise<{ base: string; reads: string[] }> {
  const reads: string[] = [];
  server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    reads.push(url.searchParams.get("after") ?? "");
    if (reads.length <= silent) return; // never answered: the client's deadline ends it
    const after = Number(url.searchParams.get("after"));
    const page = {
      batch_id: "b",
      ...(after === 0
        ? { results: [result(1)], next: 1, done: false }
        : { results: after === 1 ? [result(2)] : [], next: 2, done: after >= 1 }),
    };
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(page));
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, reads };
}

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = null;
});

async function collect(client: ControlPlaneClient): Promise<number[]> {
  const seqs: number[] = [];
  for await (const r of client.streamResults("b", { timeoutMs: 60_000, follow: false, retryBaseMs: 10 }))
    seqs.push(r.seq);
  return seqs;
}

describe("streamResults", () => {
  it("reads a page again from the same cursor when a read got no answer", async () => {
    const { base, reads } = await serve(2);
    const client = new ControlPlaneClient(base, "t", { timeoutMs: 200 });
    expect(await collect(client)).toEqual([1, 2]);
    // Two unanswered reads of cursor 0, then 0 again, 1, and the empty last page at 2.
    expect(reads).toEqual(["0", "0", "0", "1", "2"]);
  }, 30_000);

  it(`gives up after ${STREAM_READ_RETRIES} failed reads in a row, with the request's error`, async () => {
    const { base, reads } = await serve(100);
    const client = new ControlPlaneClient(base, "t", { timeoutMs: 100 });
    const error = await collect(client).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PolarRequestError);
    expect((error as PolarRequestError).code).toBe("timeout");
    expect(reads).toHaveLength(STREAM_READ_RETRIES + 1);
  }, 60_000);
});
