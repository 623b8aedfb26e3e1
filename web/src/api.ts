/**
 * The control plane's HTTP API as the dashboard uses it: the generated TypeScript client
 * (`clients/typescript`: paths and bodies typed from the OpenAPI document, the bearer token, each
 * request's deadline) on the page's own origin, with `{error:{code,message}}` answers turned into
 * {@link ApiError}.
 *
 * A route this control plane does not have (an older deployment, or a part of the API not built
 * yet) answers the Worker's JSON 404 `no route for …`: that becomes {@link ApiMissing}, so a view
 * can say which API it lacks instead of showing anything made up.
 *
 * @module
 */
import type { Client, Middleware } from "openapi-fetch";
import { createPolarClient, type paths } from "../../clients/typescript/src/index";

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
 * Rejects every non-2xx answer with {@link errorOf}'s exception. The client's own `unwrap` maps
 * errors too, but knows neither the request's method nor its path, which {@link ApiMissing} names.
 */
const errorAnswers: Middleware = {
  async onResponse({ request, response }) {
    if (response.ok) return undefined;
    const body: unknown = await response
      .clone()
      .json()
      .catch(() => null);
    const url = new URL(request.url);
    throw errorOf(response.status, request.method, url.pathname + url.search, body);
  },
};

/**
 * A client of one control plane (the page's own origin unless `base` says otherwise): `client` is
 * the generated client's typed fetch; read an answer's body with its `unwrap`.
 *
 * @example
 * ```ts
 * const api = new Api(token);
 * const { batches } = await unwrap(api.client.GET("/v1/batches", {}));
 * ```
 */
export class Api {
  readonly client: Client<paths>;
  constructor(
    readonly token: string,
    readonly base = location.origin,
  ) {
    this.client = createPolarClient({ baseUrl: base, token }).api;
    this.client.use(errorAnswers);
  }
}
