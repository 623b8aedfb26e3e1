/**
 * The gateway's one outbound WebSocket to the control plane (`/v1/gateways/connect`). The gateway
 * dials out, so GPU hosts need no inbound port. It says `hello` on every (re)connect, pings at the
 * interval the control plane asks for, reconnects with jittered exponential backoff, and hands
 * every valid control message to its owner; malformed ones are logged and dropped.
 *
 * Liveness: a socket on which nothing arrived for `MISSED_PINGS_BEFORE_RECONNECT` ping intervals
 * (45 s at the default 15 s) is replaced. The check is a timer armed from the last frame received,
 * not a test on the ping tick, so a silent socket is closed at that limit after its last frame
 * (plus timer lateness, milliseconds), never a ping interval later. A dial whose upgrade does not
 * complete within `connectTimeoutMs` (10 s) is abandoned and retried.
 *
 * A refusal that no reconnect can cure — close 4400 (another protocol version: the refusal names
 * this gateway's Polar and wire versions beside the control plane's, and which to upgrade), close 4403 (the
 * token belongs to another node), HTTP 401/403 on the upgrade (a token the control plane does not
 * accept) — stops the connection for good: it is logged at error level with the fix and handed to
 * `onRefused`. Any other refused upgrade (404, 5xx, …) is retried like a dropped socket.
 *
 * @module
 */
import WebSocket from "ws";
import {
  CLOSE_UNSUPPORTED_VERSION,
  ControlMessage,
  describeVersionRefusal,
  type ErrorMessage,
  type GatewayMessage,
  type HelloMessage,
  type Logger,
  PING,
  PONG,
  type WelcomeMessage,
} from "../protocol";
import { GatewayRefusedError, messageOf } from "./errors";

/** Reconnect backoff; defaults: first retry after ~0.5 s, doubling, capped at 10 s. */
export interface ReconnectPolicy {
  initialDelayMs: number;
  maxDelayMs: number;
}

/**
 * The cap (10 s, jittered down to 5–10 s) is well under the control plane's lease grace (60 s):
 * a gateway whose link comes back within the grace is connected again before its leases go.
 *
 * @example
 * ```ts
 * new ControlConnection({ ...opts, reconnect: { ...DEFAULT_RECONNECT, maxDelayMs: 5_000 } });
 * ```
 */
export const DEFAULT_RECONNECT: ReconnectPolicy = { initialDelayMs: 500, maxDelayMs: 10_000 };
/**
 * Longest a dial may take until the WebSocket is open (ms).
 *
 * @example
 * ```ts
 * new ControlConnection({ ...opts, connectTimeoutMs: DEFAULT_CONNECT_TIMEOUT_MS });
 * ```
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
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
  logger: Logger;
  reconnect?: ReconnectPolicy;
  /** Longest a dial may take until the socket is open; default {@link DEFAULT_CONNECT_TIMEOUT_MS}. */
  connectTimeoutMs?: number;
  /** Builds the `hello` sent on each new socket (credit and leases are current at that moment). */
  hello(): HelloMessage;
  /** Called after `welcome` on each connection (e.g. to re-send unacknowledged results). */
  onWelcome(welcome: WelcomeMessage): void;
  /** Every other valid control message (`error` messages are logged here). */
  onMessage(message: Exclude<ControlMessage, WelcomeMessage | ErrorMessage>): void;
  /** The control plane refused this gateway for good; the connection has stopped. */
  onRefused?(error: GatewayRefusedError): void;
  /**
   * A socket closed, failed to open, or was declared silent: the link is down until the next
   * `welcome` (e.g. drop pooled HTTP connections, which may have died the same way).
   */
  onDown?(why: string): void;
}

/**
 * Close codes after which reconnecting cannot help (see `control-plane/queue/handshake.ts` and `protocol/close-codes.ts`).
 *
 * @example
 * ```ts
 * FATAL_CLOSE_CODES[4403]?.fix; // "start the gateway with the --node-id …"
 * ```
 */
export const FATAL_CLOSE_CODES: Readonly<Record<number, { what: string; fix: string }>> = {
  4400: {
    what: "it speaks another protocol version",
    // Replaced by `describeVersionRefusal`, which names both sides' versions and the side to upgrade.
    fix: "run a gateway and a control plane that share a wire version",
  },
  4403: {
    what: "its token belongs to another node",
    fix: "start the gateway with the --node-id its per-gateway token was made for, or use a token for this node (polar token create --role gateway --node-id ID --register)",
  },
};

/** HTTP answers to the upgrade after which reconnecting cannot help. */
const FATAL_HTTP = new Set([401, 403]);

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
  private watchdog: NodeJS.Timeout | undefined;
  private lastHeard = Date.now();
  /** Silence after which the socket is replaced (3 ping intervals). */
  private livenessMs = DEFAULT_PING_INTERVAL_SECONDS * 1000 * MISSED_PINGS_BEFORE_RECONNECT;
  /** The last `error` message of the control plane (it explains the close that follows). */
  private lastError: string | null = null;
  /** The `hello` sent on the current socket: its versions explain a version refusal. */
  private lastHello: HelloMessage | null = null;
  /** Set once refused for good. */
  refusal: GatewayRefusedError | null = null;
  private readonly url: string;
  private readonly policy: ReconnectPolicy;
  /** Number of sockets opened so far (1 after the first connect). */
  connects = 0;
  /** The socket whose `welcome` has been handled (null before it, and once it closes). */
  private welcomed: WebSocket | null = null;

  constructor(private readonly opts: ControlConnectionOptions) {
    this.url = connectUrl(opts.controlPlaneUrl, opts.queue, opts.nodeId);
    this.policy = opts.reconnect ?? DEFAULT_RECONNECT;
  }

  /**
   * True once the control plane has answered this socket's `hello` with `welcome`, and while that
   * socket stays open. An open socket alone is not enough: until `welcome` the gateway has not
   * applied the queue's fence, so a health probe in that window would see a paused queue's gateway
   * as unpaused.
   */
  get connected(): boolean {
    return (
      this.welcomed !== null && this.welcomed === this.socket && this.socket.readyState === WebSocket.OPEN
    );
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
    clearTimeout(this.watchdog);
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
      handshakeTimeout: this.opts.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    });
    this.socket = socket;
    socket.on("open", () => this.guard("open", () => this.onOpen(socket)));
    socket.on("message", (data, isBinary) =>
      this.guard("message", () => this.onData(socket, data, isBinary)),
    );
    socket.on("unexpected-response", (_req, res) => {
      // With this listener, ws leaves the request open: read the answer, then end the attempt.
      const status = res.statusCode ?? 0;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        if (body.length < 2000) body += chunk;
      });
      const finish = () =>
        this.guard("refusal", () => {
          if (FATAL_HTTP.has(status) && socket === this.socket) {
            this.refuse(
              new GatewayRefusedError(
                `HTTP ${status} on ${this.url.replace(/\?.*$/, "")}${describeBody(body)}`,
                "set POLAR_GATEWAY_TOKEN to the control plane's gateway token (or to this node's per-gateway token)",
                null,
                status,
              ),
            );
          } else {
            this.opts.logger.warn("control plane refused the connection", {
              status,
              body: describeBody(body),
            });
          }
          // Ends the handshake (ws aborts the request, then emits error and close): onClose
          // reconnects unless refused.
          socket.terminate();
        });
      res.once("end", finish);
      res.once("error", finish);
    });
    socket.on("error", (err) => {
      if (this.refusal) return;
      this.opts.logger.warn("control plane socket error", { error: err.message });
    });
    socket.on("close", (code, reason) =>
      this.guard("close", () => this.onClose(socket, code, reason.toString("utf8"))),
    );
  }

  private onOpen(socket: WebSocket): void {
    if (socket !== this.socket) return;
    this.connects++;
    this.lastHeard = Date.now();
    this.lastError = null;
    this.lastHello = this.opts.hello();
    socket.send(JSON.stringify(this.lastHello));
    this.startPinging(DEFAULT_PING_INTERVAL_SECONDS);
  }

  /**
   * Arms the liveness timer for `lastHeard + livenessMs`. When it fires early (frames arrived
   * meanwhile) it re-arms from the newest frame; when the socket was silent that long, it goes.
   */
  private armWatchdog(): void {
    clearTimeout(this.watchdog);
    const due = this.lastHeard + this.livenessMs - Date.now();
    this.watchdog = setTimeout(
      () =>
        this.guard("liveness", () => {
          const socket = this.socket;
          if (!socket || socket.readyState !== WebSocket.OPEN) return;
          const silentMs = Date.now() - this.lastHeard;
          if (silentMs < this.livenessMs) return this.armWatchdog();
          this.opts.logger.warn("control plane silent; replacing the socket", {
            silent_ms: silentMs,
            limit_ms: this.livenessMs,
          });
          this.opts.onDown?.(`silent for ${silentMs} ms`);
          socket.terminate();
        }),
      Math.max(0, due),
    );
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
    // An `error` of a wire version this gateway does not parse (a newer control plane refusing it)
    // still explains the close that follows: keep its code and message.
    if (!parsed.success && isAnyError(json)) {
      this.lastError = `${json.code}: ${json.message}`;
      this.opts.logger.warn("control plane reported an error", { code: json.code, message: json.message });
      return;
    }
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
      this.welcomed = this.socket;
      return;
    }
    if (message.type === "error") {
      this.lastError = `${message.code}: ${message.message}`;
      this.opts.logger.warn("control plane reported an error", {
        code: message.code,
        message: message.message,
      });
      return;
    }
    this.opts.onMessage(message);
  }

  private onClose(socket: WebSocket, code: number, reason: string): void {
    if (socket !== this.socket) return;
    clearInterval(this.pingTimer);
    clearTimeout(this.watchdog);
    this.socket = null;
    if (!this.stopped) this.opts.onDown?.(`closed (${code})`);
    const fatal = FATAL_CLOSE_CODES[code];
    if (fatal && !this.stopped && code === CLOSE_UNSUPPORTED_VERSION) {
      // Both sides' versions and the side to upgrade, whichever release the control plane is.
      const hello = this.lastHello;
      const report = describeVersionRefusal(this.lastError ?? (reason || null), {
        polar: hello?.agent_version ?? "?",
        wire: [hello?.v ?? 0],
      });
      this.refuse(
        new GatewayRefusedError(`close ${code} (${fatal.what}): ${report.reason}`, report.fix, code, null),
      );
    } else if (fatal && !this.stopped) {
      const said = this.lastError ?? reason;
      this.refuse(
        new GatewayRefusedError(
          `close ${code} (${fatal.what})${said ? `: ${said}` : ""}`,
          fatal.fix,
          code,
          null,
        ),
      );
    }
    if (this.stopped) return;
    const ceiling = Math.min(this.policy.maxDelayMs, this.policy.initialDelayMs * 2 ** this.attempt);
    // Jitter spreads a fleet of gateways that lost the control plane at the same moment.
    const delay = Math.round(ceiling * (0.5 + Math.random() * 0.5));
    this.attempt++;
    this.opts.logger.info("control plane connection closed; reconnecting", { code, delay_ms: delay });
    this.reconnectTimer = setTimeout(() => this.dial(), delay);
  }

  /** Stops for good: no reconnect; logged at error level and handed to the owner once. */
  private refuse(error: GatewayRefusedError): void {
    if (this.refusal) return;
    this.refusal = error;
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.pingTimer);
    clearTimeout(this.watchdog);
    this.opts.logger.error("control plane refused this gateway for good; not reconnecting", {
      reason: error.reason,
      fix: error.fix,
      close_code: error.closeCode,
      http_status: error.httpStatus,
    });
    this.opts.onRefused?.(error);
  }

  /** Pings every interval; the liveness limit follows the interval (and is re-armed). */
  private startPinging(intervalSeconds: number): void {
    clearInterval(this.pingTimer);
    const intervalMs = intervalSeconds * 1000;
    this.livenessMs = intervalMs * MISSED_PINGS_BEFORE_RECONNECT;
    this.armWatchdog();
    this.pingTimer = setInterval(
      () =>
        this.guard("ping", () => {
          const socket = this.socket;
          if (socket?.readyState === WebSocket.OPEN) socket.send(PING);
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

/** A control plane `error` frame of any wire version: `type`, `code` and `message` are all it needs. */
function isAnyError(json: unknown): json is { code: string; message: string } {
  const e = json as { type?: unknown; code?: unknown; message?: unknown } | null;
  return (
    typeof e === "object" &&
    e !== null &&
    e.type === "error" &&
    typeof e.code === "string" &&
    typeof e.message === "string"
  );
}

/** `: <message>` from a JSON error body (`{error: {code, message}}`), or the text, or nothing. */
function describeBody(body: string): string {
  const text = body.trim();
  if (!text) return "";
  try {
    const e = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
    if (e?.message) return `: ${e.code ? `${e.code}: ` : ""}${e.message}`;
  } catch {
    // not JSON: show the text
  }
  return `: ${text.slice(0, 300)}`;
}
