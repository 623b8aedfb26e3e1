import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { type HelloMessage, type Logger, POLAR_VERSION, WIRE_VERSION } from "../protocol";
import { ControlConnection, connectUrl } from "./connection";
import { GatewayRefusedError } from "./errors";
import { type FakeControlPlane, startFakeControlPlane } from "./testing/fake-control-plane";
import { type GatewayRig, recordingLogger, startGatewayRig } from "./testing/gateway-rig";

/** The `hello` of a gateway with one slot per stage and nothing held. */
function emptyHello(nodeId: string): HelloMessage {
  return {
    v: WIRE_VERSION,
    type: "hello",
    node_id: nodeId,
    agent_version: "test",
    capacity: { max_init: 1, max_run: 1, max_postrun: 1 },
    capabilities: { runtimes: [], harnesses: [], engines: [] },
    credit: 0,
    leases: [],
  };
}

describe("connectUrl", () => {
  it("maps http→ws and https→wss, keeps a path prefix, encodes the queue", () => {
    expect(connectUrl("http://127.0.0.1:8787", "default")).toBe(
      "ws://127.0.0.1:8787/v1/gateways/connect?queue=default",
    );
    expect(connectUrl("https://polar.example/api/", "q 1")).toBe(
      "wss://polar.example/api/v1/gateways/connect?queue=q%201",
    );
    expect(connectUrl("http://127.0.0.1:8787", "default", "gpu/0")).toBe(
      "ws://127.0.0.1:8787/v1/gateways/connect?queue=default&node_id=gpu%2F0",
    );
  });

  it("refuses non-http URLs naming the option", () => {
    expect(() => connectUrl("ftp://x", "q")).toThrow(/controlPlaneUrl/);
  });
});

describe("a gateway refused for good", { timeout: 30_000 }, () => {
  const TOKEN = "refusal-token";
  let cp: FakeControlPlane | null = null;
  let rig: GatewayRig | null = null;
  afterEach(async () => {
    await rig?.stop();
    rig = null;
    await cp?.close();
    cp = null;
  });

  function dial(url: string, token: string, logger: Logger) {
    const refused: GatewayRefusedError[] = [];
    const conn = new ControlConnection({
      controlPlaneUrl: url,
      queue: "q",
      nodeId: "gpu-r",
      token,
      logger,
      reconnect: { initialDelayMs: 20, maxDelayMs: 40 },
      hello: () => emptyHello("gpu-r"),
      onWelcome() {},
      onMessage() {},
      onRefused: (e) => refused.push(e),
    });
    conn.start();
    return { conn, refused };
  }

  for (const [code, reason, said, fix] of [
    [
      4403,
      "node_id_mismatch",
      "node_id_mismatch: this token belongs to node 'gpu-a', not 'gpu-r'",
      "--node-id",
    ],
    [
      4400,
      "unsupported_version",
      "unsupported_version",
      "upgrade the control plane first, then the gateways",
    ],
  ] as const) {
    it(`close ${code}: stops the gateway at once, logs the reason and the fix at error level`, async () => {
      const { lines, logger } = recordingLogger();
      rig = await startGatewayRig({ nodeId: "gpu-r", token: TOKEN, gateway: { logger } });
      if (code === 4403)
        rig.cp.send({
          v: WIRE_VERSION,
          type: "error",
          code: "node_id_mismatch",
          message: "this token belongs to node 'gpu-a', not 'gpu-r'",
        });
      rig.cp.closeWith(code, reason);
      const refusal = await rig.gateway.refused;
      expect(refusal).toBeInstanceOf(GatewayRefusedError);
      expect(refusal).toMatchObject({ closeCode: code, httpStatus: null, exitCode: 78 });
      expect(refusal.message).toContain(`close ${code}`);
      expect(refusal.message).toContain(said);
      expect(refusal.fix).toContain(fix);
      const line = lines.find(
        (l) => l.level === "error" && l.msg.startsWith("control plane refused this gateway"),
      );
      expect(line?.fields).toMatchObject({ close_code: code, fix: refusal.fix });
      // No reconnect: a retry is scheduled (and logged) in the very close handler that settled
      // `refused`, so by now it would show; no wait needed before the negative check.
      expect(lines.some((l) => l.msg.includes("closed; reconnecting"))).toBe(false);
      expect(rig.cp.upgrades).toHaveLength(1);
      expect(rig.gateway.stats().connected).toBe(false);
    });
  }

  // What an older control plane (the last v1 release, verbatim) and a newer one (another wire
  // version than this code's, so the gateway cannot parse its frame) say before closing 4400.
  for (const [who, v, message, fix] of [
    [
      "an older control plane",
      1,
      "protocol version 2 is not supported; this control plane speaks v1",
      `upgrade the control plane first, to polar ${POLAR_VERSION} or later (it speaks v${WIRE_VERSION})`,
    ],
    [
      "a newer control plane",
      9,
      `gateway 'gpu-r' speaks wire v${WIRE_VERSION} (polar ${POLAR_VERSION}); this control plane (polar 9.0.0) speaks v8 and v9: upgrade the gateway to polar 9.0.0`,
      "upgrade this gateway to polar 9.0.0 (it speaks v8 and v9)",
    ],
  ] as const) {
    it(`close 4400 from ${who}: the refusal names both sides' versions and which to upgrade`, async () => {
      const { lines, logger } = recordingLogger();
      rig = await startGatewayRig({ nodeId: "gpu-r", token: TOKEN, gateway: { logger } });
      rig.cp.send(JSON.stringify({ v, type: "error", code: "unsupported_version", message }));
      rig.cp.closeWith(4400, "unsupported_version");
      const refusal = await rig.gateway.refused;
      expect(refusal).toMatchObject({ closeCode: 4400, exitCode: 78 });
      expect(refusal.reason).toBe(
        `close 4400 (it speaks another protocol version): this gateway (polar ${POLAR_VERSION}) speaks wire v${WIRE_VERSION}; the control plane said: unsupported_version: ${message}`,
      );
      expect(refusal.fix).toContain(fix);
      const line = lines.find((l) => l.level === "error" && l.msg.startsWith("control plane refused"));
      expect(line?.fields).toMatchObject({ reason: refusal.reason, fix: refusal.fix });
    });
  }

  it("HTTP 401 on the upgrade (a token the control plane does not accept) is final too", async () => {
    cp = await startFakeControlPlane({ token: TOKEN, refuseUpgrade: 401 });
    const { lines, logger } = recordingLogger();
    const { conn, refused } = dial(cp.url, "wrong-token", logger);
    await expect.poll(() => refused.length, { timeout: 10_000 }).toBe(1);
    expect(refused[0]).toMatchObject({ httpStatus: 401, closeCode: null });
    expect(refused[0]!.message).toContain("HTTP 401");
    expect(refused[0]!.message).toContain("refused: refused by the test (401)"); // the body's error
    expect(refused[0]!.fix).toContain("POLAR_GATEWAY_TOKEN");
    // The refused socket's close is where a retry would be scheduled and logged: wait for that
    // close (the connection lets go of its socket there), then check nothing was scheduled.
    const socketOf = (c: ControlConnection) => (c as unknown as { socket: WebSocket | null }).socket;
    await expect.poll(() => socketOf(conn), { timeout: 10_000 }).toBeNull();
    expect(lines.some((l) => l.msg === "control plane connection closed; reconnecting")).toBe(false);
    expect(cp.upgrades).toHaveLength(1);
    expect(lines.filter((l) => l.level === "error")).toHaveLength(1);
    await conn.close();
  });

  it("other refused upgrades (503) are retried until the control plane lets it in", async () => {
    cp = await startFakeControlPlane({ token: TOKEN, refuseUpgrade: (i) => (i < 2 ? 503 : null) });
    const { logger } = recordingLogger();
    const { conn, refused } = dial(cp.url, TOKEN, logger);
    await cp.waitFor((m) => m.type === "hello");
    expect(cp.upgrades).toHaveLength(3);
    expect(refused).toEqual([]);
    await conn.close();
  });
});

describe("connected", { timeout: 30_000 }, () => {
  it("is false on an open socket until welcome has been handled, and false again once it closes", async () => {
    // A bare WebSocket server that holds the gateway's hello unanswered until the test says.
    const wss = new WebSocketServer({ host: "127.0.0.1", port: 0 });
    await new Promise<void>((r) => wss.once("listening", () => r()));
    const { port } = wss.address() as AddressInfo;
    const sockets: WebSocket[] = [];
    const hellos: unknown[] = [];
    wss.on("connection", (ws) => {
      sockets.push(ws);
      ws.on("message", (d) => hellos.push(JSON.parse(d.toString())));
    });
    const welcomedWhileConnected: boolean[] = [];
    const conn: ControlConnection = new ControlConnection({
      controlPlaneUrl: `http://127.0.0.1:${port}`,
      queue: "q",
      nodeId: "gpu-w",
      token: "t",
      logger: recordingLogger().logger,
      reconnect: { initialDelayMs: 20, maxDelayMs: 40 },
      hello: () => emptyHello("gpu-w"),
      onWelcome: () => welcomedWhileConnected.push(conn.connected),
      onMessage() {},
      onRefused() {},
    });
    try {
      conn.start();
      await expect.poll(() => hellos.length, { timeout: 10_000 }).toBe(1);
      expect(conn.connected).toBe(false);
      sockets[0]!.send(
        JSON.stringify({
          v: WIRE_VERSION,
          type: "welcome",
          queue: "q",
          node_id: "gpu-w",
          kept_leases: [],
          ping_interval_seconds: 15,
        }),
      );
      await expect.poll(() => conn.connected, { timeout: 10_000 }).toBe(true);
      // onWelcome (which applies the queue's fence) runs before the gateway counts as connected.
      expect(welcomedWhileConnected).toEqual([false]);
      sockets[0]!.terminate();
      await expect.poll(() => conn.connected, { timeout: 10_000 }).toBe(false);
    } finally {
      await conn.close();
      await new Promise<void>((r) => wss.close(() => r()));
    }
  });
});

describe("ControlConnection liveness", { timeout: 30_000 }, () => {
  const TOKEN = "liveness-token";
  let cp: FakeControlPlane | null = null;
  let conn: ControlConnection | null = null;
  afterEach(async () => {
    await conn?.close();
    conn = null;
    await cp?.close();
    cp = null;
  });

  function open(url: string, logger: Logger, downs: string[] = []): ControlConnection {
    const c = new ControlConnection({
      controlPlaneUrl: url,
      queue: "q",
      nodeId: "gpu-l",
      token: TOKEN,
      logger,
      reconnect: { initialDelayMs: 100, maxDelayMs: 400 },
      hello: () => emptyHello("gpu-l"),
      onWelcome() {},
      onMessage() {},
      onDown: (why) => downs.push(why),
    });
    c.start();
    return c;
  }

  const helloOn = (n: number) => (m: { type: string }, r: { connection: number }) =>
    m.type === "hello" && r.connection === n;

  it("reconnects after the socket drops, within the jittered backoff, and says hello again", async () => {
    cp = await startFakeControlPlane({ token: TOKEN });
    const { lines, logger } = recordingLogger();
    const downs: string[] = [];
    conn = open(cp.url, logger, downs);
    await cp.waitFor(helloOn(0));
    cp.drop();
    await cp.waitFor(helloOn(1));
    expect(cp.upgrades).toHaveLength(2);
    await expect.poll(() => conn?.connected, { timeout: 10_000 }).toBe(true); // once the welcome is handled
    expect(downs).toHaveLength(1);
    const line = lines.find((l) => l.msg === "control plane connection closed; reconnecting");
    // First retry: half to all of initialDelayMs (the jitter).
    const delay = (line?.fields as { delay_ms?: number } | undefined)?.delay_ms ?? -1;
    expect(delay).toBeGreaterThanOrEqual(50);
    expect(delay).toBeLessThanOrEqual(100);
  });

  it("backs off doubling from 100 ms to its 400 ms cap while dials fail, and starts again at 100 ms after a welcome", async () => {
    // Four dials refused (503, as a control plane that is down), then one let through.
    cp = await startFakeControlPlane({ token: TOKEN, refuseUpgrade: (i) => (i < 4 ? 503 : null) });
    const { lines, logger } = recordingLogger();
    conn = open(cp.url, logger);
    // Connections count the upgrades let through: the fifth dial is connection 0.
    await cp.waitFor(helloOn(0));
    expect(cp.upgrades).toHaveLength(5);
    await expect.poll(() => conn?.connected, { timeout: 10_000 }).toBe(true);
    cp.drop();
    await cp.waitFor(helloOn(1));
    const delays = lines
      .filter((l) => l.msg === "control plane connection closed; reconnecting")
      .map((l) => (l.fields as { delay_ms: number }).delay_ms);
    expect(delays).toHaveLength(5);
    // Each wait is half to all of its ceiling (the jitter): 100, 200, 400, 400 (the cap), then 100.
    const ceilings = [100, 200, 400, 400, 100];
    delays.forEach((d, i) => {
      expect(d, `wait ${i + 1}: ${delays.join(", ")}`).toBeGreaterThanOrEqual(ceilings[i]! / 2);
      expect(d, `wait ${i + 1}: ${delays.join(", ")}`).toBeLessThanOrEqual(ceilings[i]!);
    });
  });

  it("replaces a socket silent for 3 ping intervals, and keeps one that answers its pings", async () => {
    cp = await startFakeControlPlane({ token: TOKEN, pingIntervalSeconds: 0.3 });
    const { lines, logger } = recordingLogger();
    const downs: string[] = [];
    conn = open(cp.url, logger, downs);
    await cp.waitFor((m) => m.type === "hello");
    // Pongs answered: four pings (four intervals, past the 0.9 s limit) on the first socket,
    // without a replacement.
    await expect.poll(() => cp!.pings[0] ?? 0, { timeout: 10_000 }).toBeGreaterThanOrEqual(4);
    expect(cp.upgrades).toHaveLength(1);
    expect(downs).toEqual([]);
    cp.mute = true;
    const mutedAt = Date.now();
    await expect.poll(() => cp!.upgrades.length, { timeout: 10_000 }).toBe(2);
    cp.mute = false;
    await cp.waitFor(helloOn(1));
    expect(Date.now() - mutedAt).toBeGreaterThanOrEqual(900 - 300); // the last pong may predate the mute by an interval
    const line = lines.find((l) => l.msg === "control plane silent; replacing the socket");
    expect(line?.fields).toMatchObject({ limit_ms: 900 });
    expect((line?.fields as { silent_ms?: number } | undefined)?.silent_ms ?? 0).toBeGreaterThanOrEqual(900);
    expect(downs[0]).toMatch(/^silent for \d+ ms$/);
  });
});
