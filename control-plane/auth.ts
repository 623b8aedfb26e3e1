/**
 * Bearer-token auth for the two machine roles. Tokens come from secrets; comparison is constant
 * time (both sides hashed with SHA-256, then `crypto.subtle.timingSafeEqual`, which needs equal
 * lengths). The admin token may act as either role.
 *
 * @module
 */
import { createMiddleware } from "hono/factory";
import { ApiError } from "./errors";

/** Roles a route may require. */
export type Role = "trainer" | "gateway";

/**
 * Secret holding each role's token.
 *
 * @example
 * ```ts
 * env[ROLE_SECRET.trainer]; // the trainer token
 * ```
 */
export const ROLE_SECRET: Record<Role, "POLAR_TRAINER_TOKEN" | "POLAR_GATEWAY_TOKEN"> = {
  trainer: "POLAR_TRAINER_TOKEN",
  gateway: "POLAR_GATEWAY_TOKEN",
};

const encoder = new TextEncoder();

async function digest(value: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest("SHA-256", encoder.encode(value));
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
 * Checks a request's token for `role`: 503 `not_configured` when the role's secret is unset,
 * 401 `unauthorized` when the token is missing or matches neither the role's nor the admin token.
 *
 * @example
 * ```ts
 * await authorize("trainer", c.req.header("Authorization"), c.env);
 * ```
 */
export async function authorize(
  role: Role,
  authorization: string | undefined | null,
  env: Env,
): Promise<void> {
  const secretName = ROLE_SECRET[role];
  const roleToken = env[secretName];
  if (!roleToken) {
    throw ApiError.notConfigured(
      `the control plane has no ${role} token: set the ${secretName} secret (wrangler secret put ${secretName})`,
    );
  }
  const token = bearerToken(authorization);
  if (!token)
    throw ApiError.unauthorized(`missing bearer token: send 'Authorization: Bearer <${secretName}>'`);
  // Compare against every candidate without short-circuiting, so timing does not tell which matched.
  const candidates = [roleToken, env.POLAR_ADMIN_TOKEN].filter((t): t is string => Boolean(t));
  const matches = await Promise.all(candidates.map((candidate) => tokensEqual(token, candidate)));
  if (!matches.includes(true)) throw ApiError.unauthorized(`invalid ${role} token`);
}

/**
 * Hono middleware requiring `role`.
 *
 * @example
 * ```ts
 * app.use("/v1/batches/*", requireRole("trainer"));
 * ```
 */
export function requireRole(role: Role) {
  return createMiddleware<{ Bindings: Env }>(async (c, next) => {
    await authorize(role, c.req.header("Authorization"), c.env);
    await next();
  });
}
