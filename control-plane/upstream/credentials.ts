/**
 * Authentication of the upstream-compatible surface (`/health`, `/rollout/*`, `/nodes` and the
 * fence routes `/queues/…/admin/inference/*`): what an unmodified upstream slime bridge or `polar`
 * CLI can send.
 *
 * - Headers: `Authorization: Bearer <token>` or upstream's `X-Polar-Control-Token: <token>`, with
 *   the trainer token, the admin token, or a path credential. Only this surface reads
 *   `X-Polar-Control-Token`; the `/v1` API keeps plain bearer auth.
 * - Path: a base URL `<control plane>/u/<credential>` with a path credential `pt_<name>.<secret>`.
 *   The bridge sends no credential on its status polls and cancels; whatever it appends to such a
 *   base URL carries the secret. The registry stores only the credential's SHA-256 (as for
 *   per-gateway tokens); revoking its name ends it. A path credential is scoped: it reaches this
 *   surface only (`/u/<credential>/v1/…` is 404) and one queue (its tasks run there, it sees only
 *   that queue's tasks and gateways).
 *
 * @module
 */
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { authorize, tokenHash, tokensEqual } from "../auth";
import { ApiError } from "../errors";
import { REGISTRY_NAME } from "../registry/registry-do";

/** Header upstream's bridge and CLI send when `POLAR_CONTROL_PLANE_TOKEN` is set. */
export const CONTROL_TOKEN_HEADER = "X-Polar-Control-Token";

/** Where a path credential is placed: `<control plane>/u/<credential>`. */
export const PATH_PREFIX = "/u";

/** What a request on the upstream surface may reach: every queue (role tokens) or one. */
export interface UpstreamScope {
  /** Name of the path credential, or null for a role token. */
  credential: string | null;
  /** The only queue it may use, or null for all. */
  queue: string | null;
}

/** Hono variables set by the middlewares of this module. */
export interface UpstreamVariables {
  upstreamScope: UpstreamScope;
}

const PATH_TOKEN = /^pt_([A-Za-z0-9][A-Za-z0-9_.:-]{0,127})\.([A-Za-z0-9_-]{16,})$/;

/**
 * The name of a path credential `pt_<name>.<secret>`, or null when the text has another form.
 *
 * @example
 * ```ts
 * pathTokenName("pt_slime-run-1.AbCdEfGhIjKlMnOpQr"); // "slime-run-1"
 * ```
 */
export function pathTokenName(token: string): string | null {
  const match = PATH_TOKEN.exec(token);
  return match ? match[1]! : null;
}

/**
 * Checks a path credential against the registry: its scope, or 401 when it is unknown or revoked.
 * Every active hash of the name is compared (constant time, no short-circuit).
 *
 * @example
 * ```ts
 * const scope = await verifyPathToken("pt_run-1.AbCdEfGhIjKlMnOpQr", env); // { credential: "run-1", queue: "default" }
 * ```
 */
export async function verifyPathToken(token: string, env: Env): Promise<UpstreamScope> {
  const name = pathTokenName(token);
  if (!name) throw ApiError.unauthorized("not a path credential (expected pt_<name>.<secret>)");
  const rows = await env.REGISTRY.getByName(REGISTRY_NAME).pathTokens(name);
  const presented = await tokenHash(token);
  let queue: string | null = null;
  for (const row of rows) if (await tokensEqual(presented, row.sha256)) queue = row.queue;
  if (queue === null) throw ApiError.unauthorized(`invalid or revoked path credential '${name}'`);
  return { credential: name, queue };
}

/**
 * The token a request on the upstream surface presents in a header: the bearer token, else
 * `X-Polar-Control-Token`; null when it sends neither.
 *
 * @example
 * ```ts
 * headerToken(new Headers({ "X-Polar-Control-Token": "abc" })); // "abc"
 * ```
 */
export function headerToken(headers: Headers): string | null {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headers.get("Authorization") ?? "");
  if (bearer) return bearer[1]!;
  const control = headers.get(CONTROL_TOKEN_HEADER)?.trim();
  return control ? control : null;
}

/**
 * The scope of a header token: a path credential's, or every queue for the trainer (or admin)
 * token. 401/503 as `authorize` answers them.
 */
async function scopeOfHeader(token: string | null, env: Env): Promise<UpstreamScope> {
  if (token && pathTokenName(token)) return verifyPathToken(token, env);
  await authorize("trainer", token ? `Bearer ${token}` : null, env);
  return { credential: null, queue: null };
}

/**
 * The Hono environment of the upstream surface's routes and middlewares: the Worker's bindings and
 * the scope {@link requireUpstreamAuth} sets.
 *
 * @example
 * ```ts
 * export const nodeRoutes = new Hono<UpstreamEnv>();
 * ```
 */
export type UpstreamEnv = { Bindings: Env; Variables: UpstreamVariables };

/**
 * Middleware of `/u/:credential/*`: the path credential must be valid (401 otherwise, whatever
 * follows it); headers are not read there.
 *
 * @example
 * ```ts
 * app.use(`${PATH_PREFIX}/:credential/*`, requirePathCredential);
 * ```
 */
export const requirePathCredential = createMiddleware<UpstreamEnv>(async (c, next) => {
  c.set("upstreamScope", await verifyPathToken(c.req.param("credential") ?? "", c.env));
  await next();
});

/**
 * Middleware of the upstream routes: the scope set by {@link requirePathCredential}, else a header
 * token (bearer or `X-Polar-Control-Token`) of the trainer or admin role, or a path credential.
 *
 * @example
 * ```ts
 * rolloutRoutes.use("*", requireUpstreamAuth);
 * ```
 */
export const requireUpstreamAuth = createMiddleware<UpstreamEnv>(async (c, next) => {
  if (!c.get("upstreamScope"))
    c.set("upstreamScope", await scopeOfHeader(headerToken(c.req.raw.headers), c.env));
  await next();
});

/**
 * The scope of an optional credential (for `/health`): the path's or a header's, or null when the
 * request carries none. A credential that is present must be valid.
 *
 * @example
 * ```ts
 * const scope = await optionalScope(c); // null for an anonymous health check
 * ```
 */
export async function optionalScope(c: Context<UpstreamEnv>): Promise<UpstreamScope | null> {
  const set = c.get("upstreamScope");
  if (set) return set;
  const token = headerToken(c.req.raw.headers);
  return token ? scopeOfHeader(token, c.env) : null;
}

/**
 * The scope set by the middlewares (every queue when none ran, e.g. in a direct call).
 *
 * @example
 * ```ts
 * const { queue } = scopeOf(c);
 * ```
 */
export function scopeOf(c: Context): UpstreamScope {
  return (c.get("upstreamScope") as UpstreamScope | undefined) ?? { credential: null, queue: null };
}
