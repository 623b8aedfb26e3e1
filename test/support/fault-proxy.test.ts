/**
 * The fault proxy against a real TCP echo server: pass-through, latency, blackhole (open
 * connections die silently and stay dead; new ones after it work), reset (connections and dials
 * get a TCP reset).
 */
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FaultProxy } from "./fault-proxy";

let echo: net.Server;
let echoPort: number;
const serverSockets: net.Socket[] = [];

beforeAll(async () => {
  echo = net.createServer((s) => {
    serverSockets.push(s);
    s.on("error", () => {});
    s.on("data", (d) => s.write(d));
  });
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", () => r()));
  echoPort = (echo.address() as net.AddressInfo).port;
});

afterAll(async () => {
  for (const s of serverSockets) s.destroy();
  await new Promise<void>((r) => echo.close(() => r()));
});

async function dial(port: number): Promise<net.Socket> {
  const s = net.connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => {
    s.once("connect", () => resolve());
    s.once("error", reject);
  });
  return s;
}

/** The echo of `text`, or null when nothing came back within `ms`. */
function roundTrip(s: net.Socket, text: string, ms = 300): Promise<string | null> {
  return new Promise((resolve) => {
    let got = "";
    const onData = (d: Buffer) => {
      got += d.toString();
      if (got.length >= text.length) done(got);
    };
    const done = (v: string | null) => {
      clearTimeout(timer);
      s.off("data", onData);
      resolve(v);
    };
    const timer = setTimeout(() => done(null), ms);
    s.on("data", onData);
    s.write(text);
  });
}

describe("FaultProxy", () => {
  it("passes bytes both ways and labels the connection by its first line", async () => {
    const proxy = await FaultProxy.start({ target: { host: "127.0.0.1", port: echoPort } });
    const s = await dial(proxy.port);
    expect(await roundTrip(s, "GET /x HTTP/1.1\r\n\r\n")).toBe("GET /x HTTP/1.1\r\n\r\n");
    expect(proxy.connections()[0]).toMatchObject({ label: "GET /x HTTP/1.1", deadSince: null });
    s.destroy();
    await proxy.close();
  });

  it("latency delays every chunk by at least the given time", async () => {
    const proxy = await FaultProxy.start({ target: { host: "127.0.0.1", port: echoPort } });
    const s = await dial(proxy.port);
    proxy.set({ kind: "latency", ms: 150 });
    const t0 = Date.now();
    expect(await roundTrip(s, "hello", 2000)).toBe("hello");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300); // 150 ms each way
    s.destroy();
    await proxy.close();
  });

  it("blackhole: open connections lose every byte and stay dead; the close is not passed on; new dials after it work", async () => {
    const proxy = await FaultProxy.start({ target: { host: "127.0.0.1", port: echoPort } });
    const old = await dial(proxy.port);
    expect(await roundTrip(old, "a")).toBe("a");
    const before = serverSockets.length;
    proxy.set({ kind: "blackhole" });
    expect(await roundTrip(old, "b")).toBeNull();
    const during = await dial(proxy.port); // accepted, but nothing reaches the server
    expect(await roundTrip(during, "c")).toBeNull();
    expect(serverSockets.length).toBe(before);
    proxy.set({ kind: "pass" });
    expect(await roundTrip(old, "d")).toBeNull(); // still dead
    expect(old.destroyed).toBe(false);
    const fresh = await dial(proxy.port);
    expect(await roundTrip(fresh, "e")).toBe("e");
    // The client drops the dead connection: the server's side is not told.
    const serverSide = serverSockets[before - 1]!;
    old.destroy();
    // The proxy saw the client go; a round trip on another connection after that gives a close
    // it had passed on time to reach the server.
    await expect.poll(() => proxy.connections()[0]!.clientClosedAt, { timeout: 10_000 }).not.toBeNull();
    expect(await roundTrip(fresh, "f")).toBe("f");
    expect(serverSide.destroyed).toBe(false);
    expect(proxy.connections()[0]!.deadSince).not.toBeNull();
    expect(proxy.connections()[0]!.serverClosedAt).toBeNull();
    for (const s of [during, fresh]) s.destroy();
    await proxy.close();
  });

  it("reset: open connections get a TCP reset and dials are reset at once", async () => {
    const proxy = await FaultProxy.start({ target: { host: "127.0.0.1", port: echoPort } });
    const s = await dial(proxy.port);
    expect(await roundTrip(s, "a")).toBe("a");
    const closed = new Promise<string>((resolve) => {
      s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
      s.once("close", () => resolve("close"));
    });
    proxy.set({ kind: "reset" });
    expect(await closed).toBe("ECONNRESET");
    const refused = await new Promise<string>((resolve) => {
      const d = net.connect(proxy.port, "127.0.0.1");
      d.once("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
      d.once("data", () => resolve("data"));
      d.once("connect", () => d.write("x"));
    });
    expect(refused).toBe("ECONNRESET");
    proxy.set({ kind: "pass" });
    const after = await dial(proxy.port);
    expect(await roundTrip(after, "b")).toBe("b");
    after.destroy();
    await proxy.close();
  });
});
