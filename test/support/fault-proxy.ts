/**
 * A TCP fault proxy for tests and benchmarks: it sits on loopback between a client (a gateway)
 * and a server (the control plane) and injects the faults of an internet link between them.
 *
 * - `pass`: bytes flow unchanged.
 * - `latency(ms)`: every chunk, both ways, is delivered `ms` later (order kept).
 * - `blackhole`: every connection open at that moment, and every one dialled while it lasts, loses
 *   every byte both ways from then on, and its close is not passed on either: a middlebox that
 *   silently forgot the flow. Such connections stay dead after the blackhole ends (the endpoints
 *   must notice and drop them); connections dialled after it work again.
 * - `reset`: every open connection is destroyed with a TCP reset on both sides, and every dial
 *   while it lasts is reset at once (the client sees `ECONNRESET`).
 *
 * Per connection it records what a test needs to measure detection times: the first request line
 * the client sent (`label`), when the last chunk was delivered each way, and when each side closed.
 *
 * @module
 */
import net from "node:net";

/** The proxy's current behaviour. */
export type FaultMode =
  | { kind: "pass" }
  | { kind: "latency"; ms: number }
  | { kind: "blackhole" }
  | { kind: "reset" };

/** What the proxy saw of one connection (times are `Date.now()` values, null: not yet). */
export interface ConnectionRecord {
  id: number;
  /** First line of the first bytes the client sent (e.g. `GET /v1/gateways/connect?… HTTP/1.1`). */
  label: string;
  openedAt: number;
  /** Since when its bytes vanish (a blackhole caught it); null: alive. */
  deadSince: number | null;
  /** Last chunk delivered to the server / to the client. */
  lastToServerAt: number | null;
  lastToClientAt: number | null;
  /** When the client / the server closed or lost its side. */
  clientClosedAt: number | null;
  serverClosedAt: number | null;
  /** True when the proxy destroyed it (reset). */
  reset: boolean;
}

/** Options of {@link FaultProxy.start}. */
export interface FaultProxyOptions {
  /** Where connections go. */
  target: { host: string; port: number };
  /** Listening port (default: a free one). */
  port?: number;
}

interface Conn {
  record: ConnectionRecord;
  client: net.Socket;
  server: net.Socket | null;
  /** Due time of the last delayed chunk each way: later chunks never overtake it. */
  dueToServer: number;
  dueToClient: number;
}

/**
 * @example
 * ```ts
 * const proxy = await FaultProxy.start({ target: { host: "127.0.0.1", port: 8787 } });
 * // the gateway dials proxy.url instead of the control plane
 * proxy.set({ kind: "blackhole" });
 * await sleep(10_000);
 * proxy.set({ kind: "pass" });
 * proxy.connections().filter((c) => c.label.includes("/v1/gateways/connect"));
 * await proxy.close();
 * ```
 */
export class FaultProxy {
  private mode: FaultMode = { kind: "pass" };
  private readonly open = new Set<Conn>();
  private readonly records: ConnectionRecord[] = [];
  private nextId = 1;
  /** Every mode change with its time, oldest first. */
  readonly timeline: Array<{ at: number; mode: FaultMode }> = [{ at: Date.now(), mode: { kind: "pass" } }];

  private constructor(
    private readonly server: net.Server,
    private readonly target: { host: string; port: number },
    readonly port: number,
  ) {}

  /** Listens on 127.0.0.1 and forwards to `target`. */
  static async start(opts: FaultProxyOptions): Promise<FaultProxy> {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(opts.port ?? 0, "127.0.0.1", () => resolve());
    });
    const port = (server.address() as net.AddressInfo).port;
    const proxy = new FaultProxy(server, opts.target, port);
    server.on("connection", (socket) => proxy.accept(socket));
    return proxy;
  }

  /** `http://127.0.0.1:PORT`. */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The current mode. */
  get current(): FaultMode {
    return this.mode;
  }

  /** Switches mode; a blackhole kills the open connections, a reset destroys them. */
  set(mode: FaultMode): void {
    this.mode = mode;
    const now = Date.now();
    this.timeline.push({ at: now, mode });
    if (mode.kind === "blackhole") for (const c of this.open) this.kill(c, now);
    if (mode.kind === "reset") for (const c of [...this.open]) this.destroy(c);
  }

  /** Every connection seen so far (copies), oldest first. */
  connections(): ConnectionRecord[] {
    return this.records.map((r) => ({ ...r }));
  }

  /** Stops listening and destroys every connection. */
  async close(): Promise<void> {
    for (const c of [...this.open]) {
      c.client.destroy();
      c.server?.destroy();
    }
    this.open.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    const record: ConnectionRecord = {
      id: this.nextId++,
      label: "",
      openedAt: Date.now(),
      deadSince: null,
      lastToServerAt: null,
      lastToClientAt: null,
      clientClosedAt: null,
      serverClosedAt: null,
      reset: false,
    };
    this.records.push(record);
    const c: Conn = { record, client, server: null, dueToServer: 0, dueToClient: 0 };
    client.setNoDelay(true);
    client.on("error", () => {});
    client.on("close", () => this.sideClosed(c, "client"));
    if (this.mode.kind === "reset") {
      record.reset = true;
      client.resetAndDestroy();
      return;
    }
    this.open.add(c);
    client.on("data", (chunk: Buffer) => {
      if (!record.label) record.label = chunk.toString("latin1").split("\r\n", 1)[0]!.slice(0, 200);
      this.forward(c, chunk, "toServer");
    });
    if (this.mode.kind === "blackhole") {
      // A dial into a blackhole: accepted here, but nothing ever reaches the server.
      this.kill(c, Date.now());
      return;
    }
    this.dialServer(c);
  }

  private dialServer(c: Conn): void {
    const server = net.connect(this.target.port, this.target.host);
    c.server = server;
    server.setNoDelay(true);
    // Until the server side is connected, net.Socket buffers what the client sent.
    server.on("error", () => {});
    server.on("data", (chunk: Buffer) => this.forward(c, chunk, "toClient"));
    server.on("close", () => this.sideClosed(c, "server"));
  }

  private forward(c: Conn, chunk: Buffer, way: "toServer" | "toClient"): void {
    if (c.record.deadSince !== null) return; // vanishes
    const dst = way === "toServer" ? c.server : c.client;
    if (!dst) return;
    const delay = this.mode.kind === "latency" ? this.mode.ms : 0;
    const now = Date.now();
    const key = way === "toServer" ? "dueToServer" : "dueToClient";
    const due = Math.max(c[key], now + delay);
    c[key] = due;
    const deliver = () => {
      if (c.record.deadSince !== null || dst.destroyed) return;
      dst.write(chunk);
      if (way === "toServer") c.record.lastToServerAt = Date.now();
      else c.record.lastToClientAt = Date.now();
    };
    if (due <= now) deliver();
    else setTimeout(deliver, due - now);
  }

  /** Blackholed: bytes and closes vanish from now on; the sockets stay open. */
  private kill(c: Conn, now: number): void {
    if (c.record.deadSince === null) c.record.deadSince = now;
  }

  private destroy(c: Conn): void {
    c.record.reset = true;
    this.open.delete(c);
    c.client.resetAndDestroy();
    if (c.server && !c.server.destroyed) c.server.resetAndDestroy();
  }

  private sideClosed(c: Conn, side: "client" | "server"): void {
    const now = Date.now();
    if (side === "client") c.record.clientClosedAt ??= now;
    else c.record.serverClosedAt ??= now;
    if (!this.open.has(c)) return;
    // A dead flow does not carry the close to the other side: that side must notice on its own.
    if (c.record.deadSince !== null) {
      if (c.record.clientClosedAt !== null && (c.server === null || c.record.serverClosedAt !== null))
        this.open.delete(c);
      return;
    }
    this.open.delete(c);
    const other = side === "client" ? c.server : c.client;
    const due = side === "client" ? c.dueToServer : c.dueToClient;
    // Let chunks still in the latency queue arrive before the close.
    setTimeout(() => other?.end(), Math.max(0, due - now));
  }
}
