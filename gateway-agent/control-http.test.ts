/**
 * The control-plane HTTP client against real local servers: deadlines that grow with the body,
 * keep-alive reuse, and a reset that abandons a request hung on a dead connection and dials
 * afresh.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ControlPlaneHttp, ControlPlaneRequestError, timeoutForBytes } from "./control-http";

let server: http.Server | null = null;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = null;
});

/** A server answering 201 `{ok:true}` unless `hang` says to leave the request open; counts TCP connections. */
async function serve(hang: () => boolean) {
  const stats = { connections: 0, requests: 0 };
  server = http.createServer((req, res) => {
    stats.requests++;
    req.resume();
    req.on("end", () => {
      if (hang()) return;
      res.writeHead(201, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  server.on("connection", () => stats.connections++);
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, stats };
}

describe("ControlPlaneHttp", () => {
  it("gives each request a deadline of the base plus its body at the minimum rate", () => {
    const t = { baseMs: 1000, minBytesPerSecond: 1000 };
    expect(timeoutForBytes(0, t)).toBe(1000);
    expect(timeoutForBytes(5000, t)).toBe(6000);
    expect(timeoutForBytes(10 * 1024 * 1024)).toBe(55_000); // the defaults: 15 s + 256 KiB/s
  });

  it("fails a request without a complete answer at its deadline, as retryable", async () => {
    const { url } = await serve(() => true);
    const cp = new ControlPlaneHttp(url, "t", { baseMs: 200, minBytesPerSecond: 1e9 });
    const started = Date.now();
    const err = await cp.request("PUT", "/x", "{}").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ControlPlaneRequestError);
    expect(err).toMatchObject({ retryable: true, status: null });
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(cp.resets).toBe(1); // a timed-out connection condemns the pool
    cp.close();
  });

  it("reuses a keep-alive connection, and after a reset abandons the hung request and dials afresh", async () => {
    let hang = false;
    const { url, stats } = await serve(() => hang);
    const cp = new ControlPlaneHttp(url, "secret", { baseMs: 60_000, minBytesPerSecond: 1e9 });
    expect(await cp.request("PUT", "/a", "{}")).toEqual({ status: 201, text: '{"ok":true}' });
    expect(await cp.request("PUT", "/b", "{}")).toMatchObject({ status: 201 });
    expect(stats.connections).toBe(1);
    hang = true;
    const hung = cp.request("PUT", "/c", "{}").catch((e: unknown) => e);
    await expect.poll(() => stats.requests, { timeout: 10_000 }).toBe(3);
    const started = Date.now();
    cp.resetConnections(); // e.g. the socket was declared silent
    const err = await hung;
    expect(err).toMatchObject({ retryable: true });
    expect(Date.now() - started).toBeLessThan(10_000); // at once, not at the 60 s deadline
    hang = false;
    expect(await cp.request("PUT", "/d", "{}")).toMatchObject({ status: 201 });
    expect(stats.connections).toBe(2);
    cp.close();
  });
});
