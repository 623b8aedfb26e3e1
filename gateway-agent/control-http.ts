/**
 * The gateway's HTTP requests to the control plane (artifact uploads): keep-alive connections in
 * one pool of its own, every request bounded by a deadline that fits its size, and the pool thrown
 * away — every connection in it destroyed — when an outage is detected.
 *
 * Why not the global `fetch`: its pool is shared by the whole process and cannot be flushed, so an
 * upload after a blackhole could be written into a keep-alive connection a middlebox forgot
 * during it, and hang there until the request's own timeout. Here the WebSocket's liveness check,
 * a request timeout or a connection error each call {@link ControlPlaneHttp.resetConnections}, so
 * the next request dials afresh.
 *
 * @module
 */
import http from "node:http";
import https from "node:https";

/**
 * How long a request may take: `baseMs` for the round trips, plus the body at no less than
 * `minBytesPerSecond`.
 */
export interface RequestTimeouts {
  baseMs: number;
  minBytesPerSecond: number;
}

/**
 * 15 s plus the body at 256 KiB/s: a few KiB of records get 15 s, 10 MiB get 55 s, the largest
 * artifact (95 MiB) about 6.5 minutes.
 *
 * @example
 * ```ts
 * timeoutForBytes(10 * 1024 * 1024, DEFAULT_REQUEST_TIMEOUTS); // 55_000
 * ```
 */
export const DEFAULT_REQUEST_TIMEOUTS: RequestTimeouts = { baseMs: 15_000, minBytesPerSecond: 256 * 1024 };

/**
 * The deadline of a request carrying `bytes` (ms).
 *
 * @example
 * ```ts
 * timeoutForBytes(0); // 15_000
 * ```
 */
export function timeoutForBytes(bytes: number, t: RequestTimeouts = DEFAULT_REQUEST_TIMEOUTS): number {
  return Math.ceil(t.baseMs + (bytes / t.minBytesPerSecond) * 1000);
}

/** A request that did not complete: `retryable` unless the answer says retrying cannot help. */
export class ControlPlaneRequestError extends Error {
  constructor(
    message: string,
    /** The HTTP status, or null when no answer came (timeout, connection error). */
    readonly status: number | null,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = "ControlPlaneRequestError";
  }
}

/** An answer: status and body text. */
export interface ControlPlaneAnswer {
  status: number;
  text: string;
}

/**
 * @example
 * ```ts
 * const cp = new ControlPlaneHttp("https://polar.example", token);
 * const { status, text } = await cp.request("PUT", "/v1/sessions/b.0.0/artifacts/completions?lease_id=l", body);
 * cp.resetConnections("socket declared dead"); // the next request dials afresh
 * cp.close();
 * ```
 */
export class ControlPlaneHttp {
  private agent: http.Agent;
  private readonly base: URL;
  private readonly transport: typeof http | typeof https;
  /** Times the pool was thrown away. */
  resets = 0;

  constructor(
    baseUrl: string,
    private readonly token: string,
    readonly timeouts: RequestTimeouts = DEFAULT_REQUEST_TIMEOUTS,
  ) {
    this.base = new URL(baseUrl);
    this.transport = this.base.protocol === "https:" ? https : http;
    this.agent = this.newAgent();
  }

  private newAgent(): http.Agent {
    // Idle connections older than 30 s are not reused either: many middleboxes forget idle
    // flows after a minute or so.
    return new this.transport.Agent({ keepAlive: true, timeout: 30_000, maxSockets: 16 });
  }

  /**
   * Destroys every pooled and in-flight connection and starts a new pool (in-flight requests fail
   * with a retryable error).
   */
  resetConnections(): void {
    const old = this.agent;
    this.agent = this.newAgent();
    this.resets++;
    old.destroy();
  }

  /** Closes the pool for good. */
  close(): void {
    this.agent.destroy();
  }

  /**
   * One request with a JSON body (no retry: the caller decides). Throws
   * {@link ControlPlaneRequestError} without an answer; any HTTP status is an answer.
   */
  request(method: string, pathAndQuery: string, body?: string): Promise<ControlPlaneAnswer> {
    const url = new URL(`${this.base.pathname.replace(/\/+$/, "")}${pathAndQuery}`, this.base);
    const bytes = body === undefined ? 0 : Buffer.byteLength(body);
    const deadline = timeoutForBytes(bytes, this.timeouts);
    const agent = this.agent;
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (message: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.destroy();
        reject(new ControlPlaneRequestError(message, null, true));
      };
      const req = this.transport.request(
        url,
        {
          method,
          agent,
          headers: {
            authorization: `Bearer ${this.token}`,
            ...(body === undefined
              ? {}
              : { "content-type": "application/json", "content-length": String(bytes) }),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("error", (err) => fail(`answer of ${method} ${url.pathname} broke off: ${err.message}`));
          res.on("end", () => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") });
          });
        },
      );
      const timer = setTimeout(() => {
        // The connection is suspect (a dead flow looks exactly like this): so are its siblings.
        if (agent === this.agent) this.resetConnections();
        fail(`${method} ${url.pathname}: no complete answer within ${deadline} ms (${bytes} bytes sent)`);
      }, deadline);
      req.on("error", (err) => fail(`${method} ${url.pathname}: ${err.message}`));
      if (body === undefined) req.end();
      else req.end(body);
    });
  }
}
