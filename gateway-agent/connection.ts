/**
 * The gateway's one outbound WebSocket to the control plane (`/v1/gateways/connect`). The gateway
 * dials out, so GPU hosts need no inbound port. It says `hello` on every (re)connect, pings at the
 * interval the control plane asks for, reconnects with jittered exponential backoff, and hands
 * every valid control message to its owner; malformed ones are logged and dropped.
 *
 * @module
 */
import WebSocket from "ws";
import {
  ControlMessage,
  type ErrorMessage,
  type GatewayMessage,
  type HelloMessage,
  PING,
  PONG,
  type WelcomeMessage,
} from "../protocol";
import { type GatewayLogger, messageOf } from "./errors";

/** Reconnect backoff; defaults: first retry after ~0.5 s, doubling, capped at 30 s. */
export interface ReconnectPolicy {
  initialDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RECONNECT: ReconnectPolicy = { initialDelayMs: 500, maxDelayMs: 30_000 };
/** Ping interval until `welcome` says otherwise (seconds). */
export const DEFAULT_PING_INTERVAL_SECONDS = 15;
/** Pings without any answer after which the socket is considered dead and is replaced. */
export const MISSED_PINGS_BEFORE_RECONNECT = 3;

/** Options of {@link ControlConnection}. */
export interface ControlConnectionOptions {
  controlPlaneUrl: string;
  queue: string;
  /** This gateway's node id, sent on the connect URL so a sharded queue routes it to its shard. */
  nodeId?: string;
  token: string;
  logger: GatewayLogger;
  reconnect?: ReconnectPolicy;
  /** Builds the `hello` sent on each new socket (credit and leases are current at that moment). */
  hello(): HelloMessage;
  /** Called after `welcome` on each connection (e.g. to re-send unacknowledged results). */
  onWelcome(welcome: WelcomeMessage): void;
  /** Every other valid control message (`error` messages are logged here). */
  onMessage(message: Exclude<ControlMessage, WelcomeMessage | ErrorMessage>): void;
}

/**
 * `http(s)://host[/prefix]` → `ws(s)://host[/prefix]/v1/gateways/connect?queue=Q&node_id=N`. The node id
 * lets the control plane pick this node's shard of a sharded queue before the socket reaches a
 * dispatcher (the hello must then name the same node).
 *
 * @example
 * ```ts
 * connectUrl("http://127.0.0.1:8787", "default", "gpu-0");
 * // ws://127.0.0.1:8787/v1/gateways/connect?queue=default&node_id=gpu-0
 * ```
 */
export function connectUrl(controlPlaneUrl: string, queue: string, nodeId?: string): string {
  const url = new URL(controlPlaneUrl);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`controlPlaneUrl: '${controlPlaneUrl}' must be an http(s) URL`);
  }
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/v1/gateways/connect`;
  url.search = `queue=${encodeURIComponent(queue)}`;
  if (nodeId !== undefined) url.search += `&node_id=${encodeURIComponent(nodeId)}`;
  return url.toString();
}

/**
 * A self-healing connection to the control plane.
 *
 * @example
 * ```ts
 * const conn = new ControlConnection({ controlPlaneUrl, queue: "default", token, logger, hello, onWelcome, onMessage });
 * conn.start();
 * conn.send({ v: 1, type: "credit", grant: 1 });
 * await conn.close();
 * ```
 */
export class ControlConnection {
  private socket: WebSocket | null = null;
  private stopped = false;
  private attempt = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;
  private lastHeard = Date.now();
  private readonly url: string;
  private readonly policy: ReconnectPolicy;
  /** Number of sockets opened so far (1 after the first connect). */
  connects = 0;

  constructor(private readonly opts: ControlConnectionOptions) {
    this.url = connectUrl(opts.controlPlaneUrl, opts.queue, opts.nodeId);
    this.policy = opts.reconnect ?? DEFAULT_RECONNECT;
  }

  /** True while a socket is open. */
  get connected(): boolean {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  /** Dials the control plane (and keeps re-dialling until {@link close}). */
  start(): void {
    this.stopped = false;
    this.dial();
  }

  /** Sends one message; false when no socket is open (the caller decides what to keep). */
  send(message: GatewayMessage): boolean {
    const socket = this.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) return false;
    try {
      socket.send(JSON.stringify(message));
      return true;
    } catch (err) {
      this.opts.logger.warn("send failed", { type: message.type, error: messageOf(err) });
      return false;
    }
  }

  /** Stops reconnecting and closes the socket. */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.pingTimer);
    const socket = this.socket;
    this.socket = null;
    if (!socket || socket.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => {
        socket.terminate();
        resolve();
      }, 2000);
      socket.once("close", () => {
        clearTimeout(force);
        resolve();
      });
      socket.close(1000, "gateway stopping");
    });
  }

  private dial(): void {
    if (this.stopped) return;
    const socket = new WebSocket(this.url, {
      headers: { authorization: `Bearer ${this.opts.token}` },
      maxPayload: 64 * 1024 * 1024,
      handshakeTimeout: 15_000,
    });
    this.socket = socket;
    socket.on("open", () => this.guard("open", () => this.onOpen(socket)));
    socket.on("message", (data, isBinary) =>
      this.guard("message", () => this.onData(socket, data, isBinary)),
    );
    socket.on("unexpected-response", (_req, res) => {
      this.opts.logger.warn("control plane refused the connection", { status: res.statusCode });
    });
    socket.on("error", (err) => this.opts.logger.warn("control plane socket error", { error: err.message }));
    socket.on("close", (code) => this.guard("close", () => this.onClose(socket, code)));
  }

  private onOpen(socket: WebSocket): void {
    if (socket !== this.socket) return;
    this.connects++;
    this.lastHeard = Date.now();
    socket.send(JSON.stringify(this.opts.hello()));
    this.startPinging(DEFAULT_PING_INTERVAL_SECONDS);
  }

  private onData(socket: WebSocket, data: WebSocket.RawData, isBinary: boolean): void {
    if (socket !== this.socket) return;
    this.lastHeard = Date.now();
    if (isBinary) {
      this.opts.logger.warn("binary frame from the control plane ignored");
      return;
    }
    const text = data.toString();
    if (text === PONG) return;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      this.opts.logger.warn("non-JSON message from the control plane ignored", {
        preview: text.slice(0, 120),
      });
      return;
    }
    const parsed = ControlMessage.safeParse(json);
    if (!parsed.success) {
      this.opts.logger.warn("invalid control message ignored", {
        issues: parsed.error.issues
          .slice(0, 5)
          .map((i) => `${i.path.join(".") || "(message)"}: ${i.message}`),
      });
      return;
    }
    const message = parsed.data;
    if (message.type === "welcome") {
      this.attempt = 0;
      this.startPinging(message.ping_interval_seconds);
      this.opts.onWelcome(message);
      return;
    }
    if (message.type === "error") {
      this.opts.logger.warn("control plane reported an error", {
        code: message.code,
        message: message.message,
      });
      return;
    }
    this.opts.onMessage(message);
  }

  private onClose(socket: WebSocket, code: number): void {
    if (socket !== this.socket) return;
    clearInterval(this.pingTimer);
    this.socket = null;
    if (this.stopped) return;
    const ceiling = Math.min(this.policy.maxDelayMs, this.policy.initialDelayMs * 2 ** this.attempt);
    // Jitter spreads a fleet of gateways that lost the control plane at the same moment.
    const delay = Math.round(ceiling * (0.5 + Math.random() * 0.5));
    this.attempt++;
    this.opts.logger.info("control plane connection closed; reconnecting", { code, delay_ms: delay });
    this.reconnectTimer = setTimeout(() => this.dial(), delay);
  }

  private startPinging(intervalSeconds: number): void {
    clearInterval(this.pingTimer);
    const intervalMs = intervalSeconds * 1000;
    this.pingTimer = setInterval(
      () =>
        this.guard("ping", () => {
          const socket = this.socket;
          if (!socket || socket.readyState !== WebSocket.OPEN) return;
          if (Date.now() - this.lastHeard > intervalMs * MISSED_PINGS_BEFORE_RECONNECT) {
            this.opts.logger.warn("control plane silent; replacing the socket");
            socket.terminate();
            return;
          }
          socket.send(PING);
        }),
      intervalMs,
    );
  }

  /** Runs a socket callback so that one failure is logged instead of killing the process. */
  private guard(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.opts.logger.error(`socket ${what} handler failed`, { error: messageOf(err) });
    }
  }
}
