/**
 * Throttling of failed authentication per source address. Every 401 the Worker answers (a wrong or
 * missing bearer token on any route, a wrong path credential under `/u/…`, a revoked gateway token
 * on the WebSocket route) counts one failure for the request's `CF-Connecting-IP` in the
 * `AUTH_FAILURES` rate limiter (wrangler.toml: 30 per 60 s). A source over the limit is refused
 * with 429 `too_many_auth_failures` for {@link BLOCK_SECONDS}, whatever it sends, so guessing
 * tokens or path credentials goes no faster than the limit and a flood of bad tokens costs no
 * registry lookups (a `gw_` token is checked against the RegistryDO).
 *
 * Why two parts: the Workers rate-limiting binding counts and answers in one call (`limit()`),
 * with no way to ask "is this key over?" without counting, so the refusal that follows is kept
 * in this isolate's memory. The binding's counters are per Cloudflare location and eventually
 * consistent, and the block is per isolate: an attacker spread over many locations is slowed, not
 * stopped (tokens of 256 random bits, as `polar token create` makes them, are what makes guessing hopeless;
 * this keeps it expensive and
 * visible).
 *
 * Not throttled: a request without `CF-Connecting-IP` (not through Cloudflare's edge: a local
 * workerd or a test calling the app directly, where no source can be told apart) and loopback
 * sources (`wrangler dev` sets the header to the local client's address; a process on the same
 * host can read the secrets anyway, and local gateways and tests must not lock each other out).
 *
 * @module
 */

import { createMiddleware } from "hono/factory";
import * as ipaddr from "ipaddr.js";
import { ApiError } from "./errors";

/** Seconds a source over the limit is refused (the limiter's own period). */
export const BLOCK_SECONDS = 60;

/** Sources remembered as blocked at most; the oldest is forgotten first (memory stays bounded). */
const MAX_BLOCKED = 10_000;

/** Source address → the time (ms) its block ends, in insertion order. */
const blockedUntil = new Map<string, number>();

/**
 * The key failures of this request count against, or null when it is not throttled (no
 * `CF-Connecting-IP`, or a loopback address).
 *
 * @example
 * ```ts
 * throttleKey("203.0.113.7"); // "203.0.113.7"
 * throttleKey("127.0.0.1"); // null
 * throttleKey(undefined); // null
 * ```
 */
export function throttleKey(connectingIp: string | undefined): string | null {
  const ip = connectingIp?.trim();
  if (!ip) return null;
  if (ipaddr.isValid(ip)) {
    const addr = ipaddr.process(ip); // an IPv4-mapped IPv6 address becomes its IPv4 one
    if (addr.range() === "loopback") return null;
    return addr.toString();
  }
  return ip;
}

function tooMany(until: number): ApiError {
  const seconds = Math.max(1, Math.ceil((until - Date.now()) / 1000));
  return new ApiError(
    429,
    "too_many_auth_failures",
    `too many failed authentications from this address; retry in ${seconds} s`,
    undefined,
    { "Retry-After": String(seconds) },
  );
}

function block(key: string): void {
  blockedUntil.delete(key);
  blockedUntil.set(key, Date.now() + BLOCK_SECONDS * 1000);
  while (blockedUntil.size > MAX_BLOCKED) blockedUntil.delete(blockedUntil.keys().next().value!);
}

/**
 * Hono middleware (mounted before every route): refuses a blocked source with 429, and after the
 * route ran, counts a 401 against the source, blocking it once the limiter says it is over.
 *
 * @example
 * ```ts
 * app.use("*", authThrottle);
 * ```
 */
export const authThrottle = createMiddleware<{ Bindings: Env }>(async (c, next) => {
  const limiter = c.env.AUTH_FAILURES;
  const key = limiter ? throttleKey(c.req.header("CF-Connecting-IP")) : null;
  if (key === null || !limiter) return next();
  const until = blockedUntil.get(key);
  if (until !== undefined) {
    if (until > Date.now()) throw tooMany(until);
    blockedUntil.delete(key);
  }
  await next();
  if (c.res.status !== 401) return;
  const { success } = await limiter.limit({ key });
  if (!success) block(key);
});

/**
 * Forgets every block (tests: one file's sources must not leak into the next test).
 *
 * @example
 * ```ts
 * resetAuthThrottle();
 * ```
 */
export function resetAuthThrottle(): void {
  blockedUntil.clear();
}
