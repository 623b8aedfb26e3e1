/**
 * Bearer-token auth for the four roles: trainer, gateway, admin, viewer.
 *
 * - Shared role tokens come from secrets (`POLAR_TRAINER_TOKEN`, `POLAR_GATEWAY_TOKEN`,
 *   `POLAR_ADMIN_TOKEN`, `POLAR_VIEWER_TOKEN`). The admin token may act as any role.
 * - `viewer` is read-only: the routes that require it are the GETs a dashboard needs, and the
 *   trainer token satisfies it too (a trainer may see what it submitted). A viewer token on a
 *   route of another role is refused with 403: it is a valid identity without the right.
 * - Per-gateway tokens `gw_<node>.<secret>` are stored only as SHA-256 hashes in the registry
 *   (created by `polar token create --role gateway --node-id ID`); they authenticate one node,
 *   whose hello must name the same node id.
 *
 * Comparison is constant time: both sides are hashed with SHA-256, then compared with
 * `crypto.subtle.timingSafeEqual` (which needs equal lengths, hence the hashing).
 *
 * @module
 */
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { ApiError } from "./errors";
import { REGISTRY_NAME } from "./registry/registry-do";

/** Roles a route may require. */
export type Role = "trainer" | "gateway" | "admin" | "viewer";

/**
 * Secret holding each role's shared token.
 *
 * @example
 * ```ts
 * env[ROLE_SECRET.trainer]; // the trainer token
 * ```
 */
export const ROLE_SECRET: Record<
  Role,
  "POLAR_TRAINER_TOKEN" | "POLAR_GATEWAY_TOKEN" | "POLAR_ADMIN_TOKEN" | "POLAR_VIEWER_TOKEN"
> = {
  trainer: "POLAR_TRAINER_TOKEN",
  gateway: "POLAR_GATEWAY_TOKEN",
  admin: "POLAR_ADMIN_TOKEN",
  viewer: "POLAR_VIEWER_TOKEN",
};

/**
 * Roles whose shared token satisfies a check for each role, besides admin (which satisfies all).
 *
 * @example
 * ```ts
 * SATISFIED_BY.viewer; // ["viewer", "trainer"]
 * ```
 */
export const SATISFIED_BY: Record<Role, Role[]> = {
  trainer: ["trainer"],
  gateway: ["gateway"],
  admin: ["admin"],
  viewer: ["viewer", "trainer"],
};

/** Who a request authenticated as. `nodeId` is set for a per-gateway token. */
export interface Principal {
  role: Role;
  nodeId: string | null;
}

const encoder = new TextEncoder();

async function digest(value: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest("SHA-256", encoder.encode(value));
}

function hex(buffer: ArrayBuffer): string {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

function fromHex(text: string): ArrayBuffer {
  const out = new Uint8Array(text.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(text.slice(i * 2, i * 2 + 2), 16);
  return out.buffer;
}

/**
 * SHA-256 hex of a token: what the registry stores for per-gateway tokens.
 *
 * @example
 * ```ts
 * await tokenHash("gw_node-a.s3cr3t"); // "9f86…"
 * ```
 */
export async function tokenHash(token: string): Promise<string> {
  return hex(await digest(token));
}

/**
 * Constant-time string equality.
 *
 * @example
 * ```ts
 * await tokensEqual("abc", "abc"); // true
 * ```
 */
export async function tokensEqual(presented: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([digest(presented), digest(expected)]);
  return crypto.subtle.timingSafeEqual(a, b);
}

/**
 * The token of an `Authorization: Bearer <token>` header, or null.
 *
 * @example
 * ```ts
 * bearerToken("Bearer abc"); // "abc"
 * ```
 */
export function bearerToken(header: string | undefined | null): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return match ? match[1]! : null;
}

/**
 * The node id of a per-gateway token `gw_<node>.<secret>`, or null when the token has another form.
 *
 * @example
 * ```ts
 * gatewayTokenNode("gw_node-a.AbC"); // "node-a"
 * ```
 */
export function gatewayTokenNode(token: string): string | null {
  const match = /^gw_([A-Za-z0-9][A-Za-z0-9_.:-]{0,127})\.([A-Za-z0-9_-]{16,})$/.exec(token);
  return match ? match[1]! : null;
}

async function matchesAny(token: string, candidates: (string | undefined)[]): Promise<boolean> {
  // Compare against every candidate without short-circuiting, so timing does not tell which matched.
  const present = candidates.filter((t): t is string => Boolean(t));
  const matches = await Promise.all(present.map((candidate) => tokensEqual(token, candidate)));
  return matches.includes(true);
}

/**
 * Checks a request's token for `role` and returns who it is: 503 `not_configured` when no secret
 * that satisfies the role is set (and no per-gateway token applies), 401 `unauthorized` when the
 * token is missing or wrong — also when it is a valid token of another role (the message says so;
 * the walking-skeleton contract fixed 401 for a gateway token on trainer routes) — and 403
 * `forbidden` for the viewer token on a route that needs more than `viewer`.
 *
 * @example
 * ```ts
 * const who = await authorize("trainer", c.req.header("Authorization"), c.env);
 * ```
 */
export async function authorize(
  role: Role,
  authorization: string | undefined | null,
  env: Env,
): Promise<Principal> {
  const secretName = ROLE_SECRET[role];
  const token = bearerToken(authorization);
  const node = token ? gatewayTokenNode(token) : null;
  if (token && node) {
    const hashes = await env.REGISTRY.getByName(REGISTRY_NAME).gatewayTokenHashes(node);
    const presented = await digest(token);
    let ok = false;
    for (const h of hashes) ok = crypto.subtle.timingSafeEqual(presented, fromHex(h)) || ok;
    if (!ok) throw ApiError.unauthorized(`invalid or revoked gateway token for node '${node}'`);
    if (role !== "gateway") throw ApiError.unauthorized(`a gateway token cannot use ${role} routes`);
    return { role: "gateway", nodeId: node };
  }
  const accepted = [...SATISFIED_BY[role], "admin" as const].map((r) => env[ROLE_SECRET[r]]);
  // A role with no secret of its own is still usable through a role that satisfies it (a viewer
  // route answers the trainer token on a deployment that never set POLAR_VIEWER_TOKEN).
  if (!env[secretName] && !(role === "viewer" && accepted.some(Boolean))) {
    throw ApiError.notConfigured(
      `the control plane has no ${role} token: set the ${secretName} secret (wrangler secret put ${secretName})`,
    );
  }
  if (!token)
    throw ApiError.unauthorized(`missing bearer token: send 'Authorization: Bearer <${secretName}>'`);
  if (await matchesAny(token, accepted)) return { role, nodeId: null };
  if (await matchesAny(token, [env.POLAR_VIEWER_TOKEN])) {
    throw ApiError.forbidden(`a viewer token is read-only: this route needs the ${role} role`);
  }
  const others = (Object.keys(ROLE_SECRET) as Role[])
    .filter((r) => r !== role)
    .map((r) => env[ROLE_SECRET[r]]);
  if (await matchesAny(token, others))
    throw ApiError.unauthorized(`this is not a ${role} token: it belongs to another role`);
  throw ApiError.unauthorized(`invalid ${role} token`);
}

/**
 * Hono middleware requiring `role`; the principal is available as `c.get("principal")`.
 *
 * @example
 * ```ts
 * app.use("/v1/batches/*", requireRole("trainer"));
 * ```
 */
export function requireRole(role: Role) {
  return createMiddleware<{ Bindings: Env; Variables: { principal: Principal } }>(async (c, next) => {
    c.set("principal", await authorize(role, c.req.header("Authorization"), c.env));
    await next();
  });
}

/**
 * Hono middleware requiring `read` for GET and HEAD, `write` for every other method.
 *
 * @example
 * ```ts
 * batchRoutes.use("*", requireReadWrite("viewer", "trainer"));
 * ```
 */
export function requireReadWrite(read: Role, write: Role) {
  return createMiddleware<{ Bindings: Env; Variables: { principal: Principal } }>(async (c, next) => {
    const role = c.req.method === "GET" || c.req.method === "HEAD" ? read : write;
    c.set("principal", await authorize(role, c.req.header("Authorization"), c.env));
    await next();
  });
}

/** The principal set by `requireRole`. */
export function principalOf(c: Context): Principal | undefined {
  return c.get("principal") as Principal | undefined;
}
