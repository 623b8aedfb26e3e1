/**
 * Every request of the client has a deadline of its own, covering the answer's headers AND its
 * body, and an answer is handed on only when its body arrived whole.
 *
 * Why: the global `fetch` (undici) waits up to 300 s for headers and 300 s between body chunks, so
 * a control plane that accepts a connection and never answers (a stalled Worker, a dropped flow)
 * held a CLI command or a trainer for five minutes. And openapi-fetch turns a 2xx with an empty
 * body into `data: undefined`, which a reader of `GET /v1/sessions/:id/completions` takes for
 * "no records": here an empty or short 2xx body is an error instead, like a timeout.
 *
 * A request the server is asked to hold (a long-poll's `wait=S`, a pause's `timeout_seconds`)
 * gets that time plus a margin, not the short default.
 *
 * @module
 */

/** Deadline of a request the server answers at once (ms). */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** Added to the time a request asks the server to hold it (`wait=`, `timeout_seconds`), in ms. */
export const DEFAULT_HOLD_MARGIN_MS = 30_000;
/**
 * The control plane's `timeout_seconds` of a pause that gives none (the protocol's
 * `DEFAULT_FENCE_TIMEOUT_SECONDS`; a test keeps the two equal, as this package has no dependency
 * on the protocol's code).
 */
export const PAUSE_DEFAULT_TIMEOUT_SECONDS = 300;

/** How long requests may take. */
export interface DeadlineOptions {
  /** Deadline of one request, headers and body (ms); default {@link DEFAULT_TIMEOUT_MS}. */
  timeoutMs?: number;
  /** Margin over a held request's own time (ms); default {@link DEFAULT_HOLD_MARGIN_MS}. */
  holdMarginMs?: number;
}

/** Why a request has no usable answer. */
export type PolarRequestErrorCode = "timeout" | "connection_failed" | "empty_body" | "truncated_body";

/**
 * A request without a usable answer: no complete answer within its deadline (`timeout`), no
 * connection (`connection_failed`), or a 2xx whose body is empty or shorter than its
 * `Content-Length` (`empty_body`, `truncated_body`). The message names the method, the URL and,
 * for a timeout, the deadline. Every one of these may succeed when retried.
 *
 * @example
 * ```ts
 * try { await unwrap(polar.api.GET("/v1/batches/{id}", { params: { path: { id } } })); }
 * catch (err) { if (err instanceof PolarRequestError && err.code === "timeout") console.log(err.deadlineMs); }
 * ```
 */
export class PolarRequestError extends Error {
  override name = "PolarRequestError";
  constructor(
    readonly code: PolarRequestErrorCode,
    /** `GET`, `POST`, … */
    readonly method: string,
    /** The whole URL, query included. */
    readonly url: string,
    /** The deadline the request had (ms). */
    readonly deadlineMs: number,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${method} ${url}: ${message}`, options);
  }
}

function holdSeconds(value: unknown): number | null {
  const n = typeof value === "string" ? Number(value) : value;
  return typeof n === "number" && Number.isFinite(n) && n > 0 ? n : null;
}

/**
 * The deadline of `request` (ms): `timeoutMs`, or for a request the server holds — `wait=S` in
 * the query, a pause's `timeout_seconds` (300 s when the body gives none) — S s plus the margin
 * when that is longer.
 *
 * @example
 * ```ts
 * await deadlineFor(new Request("http://cp/v1/batches/b/results?after=0&wait=60")); // 90_000
 * ```
 */
export async function deadlineFor(request: Request, opts: DeadlineOptions = {}): Promise<number> {
  const base = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const margin = opts.holdMarginMs ?? DEFAULT_HOLD_MARGIN_MS;
  const url = new URL(request.url);
  let held = holdSeconds(url.searchParams.get("wait"));
  if (request.method === "POST" && url.pathname.endsWith("/inference/pause")) {
    let body: unknown = null;
    try {
      body = JSON.parse(await request.clone().text());
    } catch {
      // No JSON body: the server's default applies.
    }
    const given = (body as { timeout_seconds?: unknown } | null)?.timeout_seconds;
    held = given === undefined ? PAUSE_DEFAULT_TIMEOUT_SECONDS : holdSeconds(given);
  }
  return held === null ? base : Math.max(base, Math.ceil(held * 1000) + margin);
}

/** Statuses whose answer has no body by definition. */
const NULL_BODY = new Set([101, 204, 205, 304]);

/**
 * `fetchImpl` with a deadline on every request (see {@link deadlineFor}), the body read whole
 * within it, and an empty or short 2xx body refused: each failure a {@link PolarRequestError}.
 * The answer is returned as a buffered `Response`. A `text/event-stream` answer is returned as it
 * streams, its deadline covering the headers only (the stream's own keep-alives tell it is alive).
 *
 * @example
 * ```ts
 * const f = withDeadline(fetch, { timeoutMs: 5_000 });
 * const res = await f(new Request("http://127.0.0.1:8787/v1/batches/b1")); // rejects after 5 s without an answer
 * ```
 */
export function withDeadline(fetchImpl: typeof fetch, opts: DeadlineOptions = {}): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const deadlineMs = await deadlineFor(request, opts);
    const { method, url } = request;
    const fail = (code: PolarRequestErrorCode, message: string, cause?: unknown) =>
      new PolarRequestError(code, method, url, deadlineMs, message, { cause });
    const late = (cause: unknown) =>
      fail(
        "timeout",
        `no complete answer within ${deadlineMs} ms (the request's deadline: timeoutMs, plus holdMarginMs over a wait)`,
        cause,
      );
    const controller = new AbortController();
    // Kept whole for one retry on a reused connection the server had closed (see `sendOnce`).
    const again = (await retriesOnStaleSocket(request)) ? request.clone() : null;
    let outgoing = new Request(request, { signal: controller.signal });
    let timedOut = false;
    // The deadline is a race as well as an abort: undici follows a Request's signal through weak
    // references, so once `outgoing` is collected mid-request an abort can be lost and the fetch
    // wait on (seen: a CLI command hanging past its deadline). The rejection below fires anyway,
    // and the closure keeps `outgoing` (and the abort that frees the socket) alive until then.
    let expire: (err: unknown) => void = () => {};
    const expired = new Promise<never>((_, reject) => {
      expire = reject;
    });
    expired.catch(() => {});
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
      void outgoing.signal.aborted;
      expire(late(controller.signal.reason));
    }, deadlineMs);
    const callerAbort = () => controller.abort(request.signal.reason);
    if (request.signal.aborted) callerAbort();
    else request.signal.addEventListener("abort", callerAbort, { once: true });
    let streaming = false;
    try {
      let res: Response;
      try {
        try {
          res = await Promise.race([fetchImpl(outgoing), expired]);
        } catch (err) {
          if (timedOut || request.signal.aborted || !again || !staleSocket(err)) throw err;
          outgoing = new Request(again, { signal: controller.signal });
          res = await Promise.race([fetchImpl(outgoing), expired]);
        }
      } catch (err) {
        if (timedOut) throw err instanceof PolarRequestError ? err : late(err);
        if (request.signal.aborted) throw err;
        throw fail("connection_failed", `no answer: ${causeText(err)}`, err);
      }
      if ((res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
        streaming = true;
        return res;
      }
      let bytes: ArrayBuffer;
      try {
        bytes = await Promise.race([res.arrayBuffer(), expired]);
      } catch (err) {
        if (timedOut) throw err instanceof PolarRequestError ? err : late(err);
        if (request.signal.aborted) throw err;
        throw fail("truncated_body", `the ${res.status} answer broke off: ${causeText(err)}`, err);
      }
      const declared = res.headers.get("content-length");
      // A decoded (gzip, …) body is not the length the header gives.
      if (declared !== null && !res.headers.get("content-encoding") && Number(declared) !== bytes.byteLength)
        throw fail(
          "truncated_body",
          `the ${res.status} answer has ${bytes.byteLength} of its ${declared} bytes (Content-Length)`,
        );
      const bodiless = NULL_BODY.has(res.status) || method === "HEAD";
      if (res.ok && !bodiless && bytes.byteLength === 0)
        throw fail("empty_body", `the ${res.status} answer has an empty body (a document was expected)`);
      return new Response(bodiless ? null : bytes, {
        status: res.status,
        statusText: res.statusText,
        headers: res.headers,
      });
    } finally {
      clearTimeout(timer);
      // A stream stays cancellable by the caller's signal.
      if (!streaming) request.signal.removeEventListener("abort", callerAbort);
    }
  };
}

/**
 * Whether a failed fetch is a kept-alive connection the server closed as the request went out
 * (undici: `UND_ERR_SOCKET` "other side closed", or a reset). Seen against `wrangler dev` on a
 * loaded machine: a connection reused from the pool had been closed by the server, and the
 * request failed without the server having read it. A fresh connection succeeds.
 */
function staleSocket(err: unknown): boolean {
  const code = (err as { cause?: { code?: unknown } }).cause?.code;
  return code === "UND_ERR_SOCKET" || code === "ECONNRESET";
}

/**
 * Whether sending `request` twice does no harm, so it is sent once more after a stale connection
 * ({@link staleSocket}): the methods HTTP defines as idempotent (a cancel is a `DELETE`, an
 * artifact a `PUT`), and a batch created with its own `batch_id` (the same id and body is a
 * replay: the control plane answers with the batch it has). Any other POST is never repeated: it
 * fails as before.
 *
 * @example
 * ```ts
 * await retriesOnStaleSocket(new Request("http://cp/v1/batches/b1")); // true (GET)
 * ```
 */
export async function retriesOnStaleSocket(request: Request): Promise<boolean> {
  const method = request.method.toUpperCase();
  if (["GET", "HEAD", "OPTIONS", "PUT", "DELETE"].includes(method)) return true;
  if (method !== "POST") return false;
  if (!new URL(request.url).pathname.endsWith("/v1/batches")) return false;
  try {
    const body = JSON.parse(await request.clone().text()) as { batch_id?: unknown } | null;
    return typeof body?.batch_id === "string" && body.batch_id.length > 0;
  } catch {
    return false;
  }
}

function causeText(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const inner = e.cause?.code ?? e.cause?.message;
  return inner ? `${e.message} (${inner})` : String(e.message ?? err);
}
