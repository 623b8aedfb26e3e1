/**
 * The standalone proxy's HTTP API (enabled by an admin token): capture sessions for agents run
 * outside Polar, and the inference fence.
 *
 * - `POST /sessions` `{session_id?, meta?, dir?}` → `{session_id, key, base_url}`
 * - `GET /sessions/:key/completions` → `{session_id, completions}`
 * - `GET /sessions/:key/trajectory?builder=NAME[&config=JSON]` → a Trajectory (default builder:
 *   `conversation` in token mode, else `per_request`)
 * - `DELETE /sessions/:key` → `{session_id, closed: true}`
 * - `POST /admin/inference/pause` `{timeout_ms?, mode?}` → `{drained, inflight}`; `POST /admin/inference/resume`;
 *   `GET /admin/inference/status`; `POST /admin/inference/policy_version` `{policy_version}`
 *
 * Routed by Hono like the control plane's API, on the proxy's own Node server: a route throws
 * {@link ProxyHttpError} and the server's one error mapping answers it, so the admin API and the
 * inference routes give the same error bodies.
 *
 * @module
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import type http from "node:http";
import path from "node:path";
import { type Context, Hono } from "hono";
import { defaultBuilderFor, loadBuilder } from "./builders";
import type { CaptureStore } from "./capture";
import type { EngineName } from "./engines";
import { ProxyHttpError } from "./errors";
import type { InferenceFence } from "./fence";
import { isObject } from "./json";
import { jsonObjectBody, MAX_REQUEST_BODY_BYTES, parseJsonBody, readBody } from "./request-io";
import { sessionSamplingPolicy } from "./sampling";

/** Longest wait a `pause` call may ask for (ms). */
export const MAX_PAUSE_TIMEOUT_MS = 3_600_000;
/** Default drain wait of `pause` (ms). */
export const DEFAULT_PAUSE_TIMEOUT_MS = 60_000;

const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function authorised(req: http.IncomingMessage, token: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? "");
  const given = Buffer.from(m?.[1]?.trim() ?? "");
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

async function jsonBody(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  const text = await readBody(req, MAX_REQUEST_BODY_BYTES);
  if (text.trim() === "") return {};
  return jsonObjectBody(parseJsonBody(text));
}

const bad = (param: string, message: string) =>
  new ProxyHttpError(400, "invalid_request_error", "invalid_request", `${param}: ${message}`, param);

const notFound = (method: string, urlPath: string) =>
  new ProxyHttpError(404, "invalid_request_error", "not_found", `no route for ${method} ${urlPath}`);

/** Refuses a request without the admin bearer token (before anything else, route or not). */
function requireAdminToken(req: http.IncomingMessage, token: string): void {
  if (!authorised(req, token)) {
    throw new ProxyHttpError(
      401,
      "invalid_request_error",
      "invalid_admin_token",
      "send Authorization: Bearer <POLAR_ADMIN_TOKEN>",
    );
  }
}

/**
 * The proxy as the admin routes act on it (the `ProxyServer` is one): its options, capture store,
 * replicas, fence and status. A structural type, so this module needs nothing from the server's.
 */
export interface AdminHost {
  readonly opts: { readonly adminToken?: string; readonly captureDir?: string; readonly engine: EngineName };
  readonly store: CaptureStore;
  readonly replicas: { forget(sessionId: string): void };
  readonly fence: InferenceFence;
  status(): unknown;
}

/** What a route sees besides the Hono request: the proxy and the Node request (its body). */
interface AdminEnv {
  server: AdminHost;
  req: http.IncomingMessage;
  /** The path as the server matched it (trailing slashes stripped, not decoded). */
  urlPath: string;
  /** The query as the server parsed it. */
  query: URLSearchParams;
}

type AdminContext = Context<{ Bindings: AdminEnv }>;

/** `POST /sessions`: opens a capture session and returns its key. */
async function openSession(c: AdminContext): Promise<Response> {
  const { server, req } = c.env;
  const body = await jsonBody(req);
  const id = body.session_id ?? `sess-${randomBytes(6).toString("hex")}`;
  if (typeof id !== "string" || !SESSION_ID.test(id))
    throw bad("session_id", "1-128 of [A-Za-z0-9._-], starting with a letter or digit");
  if (body.meta !== undefined && !isObject(body.meta)) throw bad("meta", "must be an object");
  if (body.dir !== undefined && typeof body.dir !== "string") throw bad("dir", "must be a string");
  // A policy that cannot be applied is refused here, not on the session's first model call.
  if (isObject(body.meta)) sessionSamplingPolicy(body.meta);
  if (server.store.hasSession(id)) {
    throw new ProxyHttpError(
      409,
      "invalid_request_error",
      "session_exists",
      `session_id: '${id}' is already open`,
    );
  }
  const dir =
    typeof body.dir === "string"
      ? path.resolve(body.dir)
      : server.opts.captureDir
        ? path.join(server.opts.captureDir, id)
        : undefined;
  const { key } = server.store.open(id, isObject(body.meta) ? body.meta : {}, dir ? { dir } : {});
  const host = req.headers.host ?? "127.0.0.1";
  return c.json({ session_id: id, key, base_url: `http://${host}`, dir: dir ?? null }, 201);
}

/** The key of a `/sessions/:key…` path, decoded as the path gave it (never Hono's lenient decoding). */
function keyOf(urlPath: string): string {
  return decodeURIComponent(urlPath.split("/")[2] ?? "");
}

/** `GET /sessions/:key/trajectory?builder=NAME[&config=JSON]`: the session built into a Trajectory. */
async function buildTrajectory(c: AdminContext, sessionId: string): Promise<Response> {
  const { server, urlPath, query } = c.env;
  // Without ?builder= the same default a gateway gives a task that names none.
  const strategy = query.get("builder") ?? defaultBuilderFor(server.opts.engine);
  let config: Record<string, unknown> = {};
  const raw = query.get("config");
  if (raw) {
    try {
      const parsed = JSON.parse(raw) as unknown;
      if (!isObject(parsed)) throw new Error("not an object");
      config = parsed;
    } catch {
      throw bad("config", "must be a JSON object");
    }
  }
  let build: Awaited<ReturnType<typeof loadBuilder>>;
  try {
    build = await loadBuilder(strategy);
  } catch (err) {
    throw bad("builder", err instanceof Error ? err.message : String(err));
  }
  const task = server.store.resolveKey(keyOf(urlPath))?.meta.task_id;
  return c.json(
    build(server.store.records(sessionId), {
      session_id: sessionId,
      task_id: typeof task === "string" ? task : sessionId,
      config: config as never,
    }),
  );
}

/** `POST /admin/inference/pause` `{timeout_ms?, mode?}`: pauses the fence and waits for the drain. */
async function pauseInference(c: AdminContext): Promise<Response> {
  const body = await jsonBody(c.env.req);
  const t = body.timeout_ms ?? DEFAULT_PAUSE_TIMEOUT_MS;
  if (typeof t !== "number" || !Number.isFinite(t) || t < 0 || t > MAX_PAUSE_TIMEOUT_MS) {
    throw bad("timeout_ms", `must be a number of milliseconds in [0, ${MAX_PAUSE_TIMEOUT_MS}]`);
  }
  const mode = body.mode ?? "drain";
  if (mode !== "drain" && mode !== "abort") throw bad("mode", "must be 'drain' or 'abort'");
  return c.json(await c.env.server.fence.pause({ timeoutMs: t, mode }));
}

/** `POST /admin/inference/policy_version` `{policy_version}`: the version stamped on new calls. */
async function setPolicyVersion(c: AdminContext): Promise<Response> {
  const body = await jsonBody(c.env.req);
  const v = body.policy_version;
  if (v !== null && typeof v !== "string") throw bad("policy_version", "must be a string or null");
  c.env.server.fence.setPolicyVersion(v);
  return c.json(c.env.server.status());
}

/** The session of the path's key, or the error every `/sessions/:key…` route gives without one. */
function sessionOf(c: AdminContext): string {
  const sessionId = c.env.server.store.sessionOfKey(keyOf(c.env.urlPath));
  if (!sessionId)
    throw new ProxyHttpError(404, "invalid_request_error", "unknown_session", "no open session has this key");
  return sessionId;
}

/** The admin routes. */
const adminApp = new Hono<{ Bindings: AdminEnv }>();
adminApp.use("*", async (c, next) => {
  requireAdminToken(c.env.req, c.env.server.opts.adminToken!);
  await next();
});
// An unknown key is refused before the method is looked at, whatever the method.
for (const route of ["/sessions/:key", "/sessions/:key/completions", "/sessions/:key/trajectory"]) {
  adminApp.use(route, async (c, next) => {
    sessionOf(c);
    await next();
  });
}
adminApp.post("/sessions", openSession);
adminApp.get("/sessions/:key/completions", async (c) => {
  const sessionId = sessionOf(c);
  await c.env.server.store.flush(sessionId);
  return c.json({ session_id: sessionId, completions: c.env.server.store.records(sessionId) });
});
adminApp.get("/sessions/:key/trajectory", (c) => buildTrajectory(c, sessionOf(c)));
adminApp.delete("/sessions/:key", async (c) => {
  const sessionId = sessionOf(c);
  c.env.server.replicas.forget(sessionId);
  await c.env.server.store.close(sessionId);
  return c.json({ session_id: sessionId, closed: true });
});
adminApp.post("/admin/inference/pause", pauseInference);
adminApp.post("/admin/inference/resume", (c) => {
  c.env.server.fence.resume();
  return c.json(c.env.server.status());
});
adminApp.get("/admin/inference/status", (c) => c.json(c.env.server.status()));
adminApp.post("/admin/inference/policy_version", setPolicyVersion);
adminApp.notFound((c) => {
  throw notFound(c.env.req.method ?? "GET", c.env.urlPath);
});
// Errors go back to the proxy server, which answers them in the caller's API family.
adminApp.onError((err) => {
  throw err;
});

/** Methods the admin routes know; Hono would answer HEAD as GET, which this API never did. */
const ROUTED_METHODS = new Set(["GET", "POST", "DELETE"]);

/**
 * Serves one admin request (the caller checked that the path is an admin path).
 *
 * @example
 * ```ts
 * if (path.startsWith("/sessions")) await handleAdmin(server, req, res, path, url.searchParams);
 * ```
 */
export async function handleAdmin(
  server: AdminHost,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  urlPath: string,
  query: URLSearchParams,
): Promise<void> {
  const method = req.method ?? "GET";
  if (!ROUTED_METHODS.has(method)) {
    requireAdminToken(req, server.opts.adminToken!);
    throw notFound(method, urlPath);
  }
  // Only the method and path route; routes read the body, headers and query from the server's own.
  const env: AdminEnv = { server, req, urlPath, query };
  const response = await adminApp.fetch(new Request(`http://proxy${urlPath}`, { method }), env);
  res.writeHead(response.status, { "content-type": "application/json" }).end(await response.text());
}
