/**
 * The control plane's HTTP API as the dashboard uses it: same origin, bearer token, JSON bodies,
 * `{error:{code,message}}` turned into {@link ApiError}.
 *
 * A route this control plane does not have (an older deployment, or a part of the API not built
 * yet) answers the Worker's JSON 404 `no route for …`: that becomes {@link ApiMissing}, so a view
 * can say which API it lacks instead of showing anything made up.
 *
 * @module
 */

/** An error answer of the API. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

/** The control plane has no such route. */
export class ApiMissing extends ApiError {
  constructor(
    readonly method: string,
    readonly path: string,
  ) {
    super(404, "not_found", `this control plane has no ${method} ${path}`);
    this.name = "ApiMissing";
  }
}

/** Request options of {@link Api.request}. */
export interface RequestOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
}

/**
 * Turns an error answer into the matching exception.
 *
 * @example
 * ```ts
 * errorOf(404, "GET", "/v1/events", { error: { code: "not_found", message: "no route for GET /v1/events" } });
 * // ApiMissing
 * ```
 */
export function errorOf(status: number, method: string, path: string, body: unknown): ApiError {
  const err = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const code = typeof err?.code === "string" ? err.code : `http_${status}`;
  const message = typeof err?.message === "string" ? err.message : `HTTP ${status}`;
  if (status === 404 && code === "not_found" && message.startsWith("no route for "))
    return new ApiMissing(method, path.split("?")[0]!);
  return new ApiError(status, code, message);
}

/**
 * A client of one control plane (the page's own origin unless `base` says otherwise).
 *
 * @example
 * ```ts
 * const api = new Api(token);
 * const { batches } = await api.get<{ batches: unknown[] }>("/v1/batches");
 * ```
 */
export class Api {
  constructor(
    readonly token: string,
    readonly base = "",
  ) {}

  /** Headers of every request (the bearer token). */
  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.token}`, ...extra };
  }

  async request<T>(path: string, opts: RequestOptions = {}): Promise<T> {
    const method = opts.method ?? "GET";
    const res = await fetch(this.base + path, {
      method,
      headers: this.headers(opts.body === undefined ? {} : { "content-type": "application/json" }),
      ...(opts.body === undefined ? {} : { body: JSON.stringify(opts.body) }),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    const text = await res.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      throw new ApiError(
        res.status,
        "bad_body",
        `${method} ${path} answered ${res.status} with a body that is not JSON`,
      );
    }
    if (!res.ok) throw errorOf(res.status, method, path, body);
    return body as T;
  }

  get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return this.request<T>(path, signal ? { signal } : {});
  }
}

/**
 * `encodeURIComponent` for path segments, short name for templates.
 *
 * @example
 * ```ts
 * `/v1/batches/${seg("a/b")}`; // "/v1/batches/a%2Fb"
 * ```
 */
export const seg = encodeURIComponent;
