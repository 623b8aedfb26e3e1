/**
 * The TypeScript client of the Polar-TS control plane: the request and response types generated
 * from its OpenAPI document (`./schema.ts`, by `npm run gen:api`), openapi-fetch as the fetch
 * layer, and one mapping of the API's `{error:{code,message,details?}}` answers to a typed
 * exception, so callers write `try/catch` on {@link PolarApiError} instead of checking each reply.
 *
 * @module
 */
import createClient, { type Client } from "openapi-fetch";
import { type DeadlineOptions, withDeadline } from "./deadline.js";
import type { operations, paths } from "./schema.js";

export {
  DEFAULT_HOLD_MARGIN_MS,
  DEFAULT_TIMEOUT_MS,
  type DeadlineOptions,
  deadlineFor,
  PAUSE_DEFAULT_TIMEOUT_SECONDS,
  PolarRequestError,
  type PolarRequestErrorCode,
  retriesOnStaleSocket,
  withDeadline,
} from "./deadline.js";
export type { components, operations, paths } from "./schema.js";

/** A non-2xx answer of the control plane, with the code and message of its error body. */
export class PolarApiError extends Error {
  override name = "PolarApiError";
  /** The body's `error.message` alone (`message` is prefixed with the status and code). */
  readonly reason: string;
  constructor(
    /** The HTTP status (400 invalid input, 401 token, 404 unknown id, 409 conflict, …). */
    readonly status: number,
    /** The body's `error.code` (`invalid_request`, `not_found`, …); `http_error` without one. */
    readonly code: string,
    message: string,
    /** The body's `error.details`, when it has some (e.g. the offending field's path). */
    readonly details?: unknown,
  ) {
    super(`${status} ${code}: ${message}`);
    this.reason = message;
  }
}

/**
 * The JSON body of an operation's 200 (or, with `Status`, another) answer, by operationId.
 *
 * @example
 * ```ts
 * type Status = ResponseOf<"getBatch">; // { batch_id, status, tasks: [...], ... }
 * ```
 */
export type ResponseOf<Op extends keyof operations, Status extends number = 200> = operations[Op] extends {
  responses: { [S in Status]: { content: { "application/json": infer Body } } };
}
  ? Body
  : never;

/**
 * The JSON request body of an operation, by operationId.
 *
 * @example
 * ```ts
 * const body: RequestOf<"pauseQueueInference"> = { mode: "drain", timeout_seconds: 30 };
 * ```
 */
export type RequestOf<Op extends keyof operations> = operations[Op] extends {
  requestBody?: { content: { "application/json": infer Body } };
}
  ? Body
  : never;

/** What an openapi-fetch call resolves to (either member of its union). */
interface Answer<D> {
  data?: D;
  error?: unknown;
  response: Response;
}

/**
 * Awaits an openapi-fetch call and returns its body, or throws {@link PolarApiError} for a non-2xx
 * answer: the one place where the API's error bodies become exceptions.
 *
 * @example
 * ```ts
 * const status = await unwrap(polar.api.GET("/v1/batches/{id}", { params: { path: { id } } }));
 * ```
 */
export async function unwrap<D>(pending: Promise<Answer<D>>): Promise<D> {
  const { data, error, response } = await pending;
  if (response.ok) return data as D;
  const body = (error as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)
    ?.error;
  if (body && typeof body.code === "string" && typeof body.message === "string")
    throw new PolarApiError(response.status, body.code, body.message, body.details);
  const text = typeof error === "string" ? error : JSON.stringify(error ?? "");
  throw new PolarApiError(response.status, "http_error", text.slice(0, 500) || response.statusText);
}

/**
 * Where the control plane is, the bearer token of the role the calls need, and how long a request
 * may take (`timeoutMs`, default 30 s; a long-poll's `wait=` or a pause's `timeout_seconds` plus
 * `holdMarginMs`, default 30 s). A request past its deadline, without a connection, or whose 2xx
 * body is empty or short rejects with {@link PolarRequestError}.
 */
export interface PolarClientOptions extends DeadlineOptions {
  /** The control plane's URL, e.g. `http://127.0.0.1:8787` (`polar dev`). */
  baseUrl: string;
  /** A trainer, admin (or, where the route allows it, viewer) token. */
  token: string;
  /** A fetch of your own (tests, proxies); the global one otherwise. The deadline wraps it too. */
  fetch?: typeof fetch;
}

/** A typed client: `api` is openapi-fetch's, on the document's paths, with the token set. */
export interface PolarClient {
  api: Client<paths>;
  baseUrl: string;
}

/**
 * A client of the control plane's API, every path, parameter and body typed from the document.
 *
 * @example
 * ```ts
 * const polar = createPolarClient({ baseUrl: "http://127.0.0.1:8787", token: process.env.POLAR_TRAINER_TOKEN!, timeoutMs: 10_000 });
 * const { batches } = await unwrap(polar.api.GET("/v1/batches", { params: { query: { limit: "20" } } }));
 * ```
 */
export function createPolarClient(opts: PolarClientOptions): PolarClient {
  const baseUrl = opts.baseUrl.replace(/\/+$/, "");
  for (const name of ["timeoutMs", "holdMarginMs"] as const) {
    const v = opts[name];
    if (v !== undefined && !(Number.isFinite(v) && v > 0))
      throw new RangeError(`${name} must be a number of milliseconds > 0, got ${v}`);
  }
  // Looked up at call time, so a fetch replaced after the client was made (tests) is used.
  const inner: typeof fetch = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const api = createClient<paths>({
    baseUrl,
    headers: { authorization: `Bearer ${opts.token}` },
    fetch: withDeadline(inner, { timeoutMs: opts.timeoutMs, holdMarginMs: opts.holdMarginMs }),
  });
  return { api, baseUrl };
}
