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
 * @module
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import type http from "node:http";
import path from "node:path";
import { defaultBuilderFor, loadBuilder } from "./builders";
import { ProxyHttpError } from "./errors";
import { isObject } from "./json";
import { MAX_REQUEST_BODY_BYTES, type ProxyServer, readBody, sendJson } from "./server";

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
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ProxyHttpError(400, "invalid_request_error", "invalid_json", "(body): not valid JSON");
  }
  if (!isObject(body))
    throw new ProxyHttpError(
      400,
      "invalid_request_error",
      "invalid_request",
      "(body): must be a JSON object",
    );
  return body;
}

const bad = (param: string, message: string) =>
  new ProxyHttpError(400, "invalid_request_error", "invalid_request", `${param}: ${message}`, param);

/**
 * Serves one admin request (the caller checked that the path is an admin path).
 *
 * @example
 * ```ts
 * if (path.startsWith("/sessions")) await handleAdmin(server, req, res, path, url.searchParams);
 * ```
 */
export async function handleAdmin(
  server: ProxyServer,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  urlPath: string,
  query: URLSearchParams,
): Promise<void> {
  if (!authorised(req, server.opts.adminToken!)) {
    throw new ProxyHttpError(
      401,
      "invalid_request_error",
      "invalid_admin_token",
      "send Authorization: Bearer <POLAR_ADMIN_TOKEN>",
    );
  }
  const method = req.method ?? "GET";
  const notFound = () =>
    new ProxyHttpError(404, "invalid_request_error", "not_found", `no route for ${method} ${urlPath}`);
  if (urlPath === "/sessions" && method === "POST") {
    const body = await jsonBody(req);
    const id = body.session_id ?? `sess-${randomBytes(6).toString("hex")}`;
    if (typeof id !== "string" || !SESSION_ID.test(id))
      throw bad("session_id", "1-128 of [A-Za-z0-9._-], starting with a letter or digit");
    if (body.meta !== undefined && !isObject(body.meta)) throw bad("meta", "must be an object");
    if (body.dir !== undefined && typeof body.dir !== "string") throw bad("dir", "must be a string");
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
    sendJson(res, 201, { session_id: id, key, base_url: `http://${host}`, dir: dir ?? null });
    return;
  }
  const m = /^\/sessions\/([^/]+)(\/completions|\/trajectory)?$/.exec(urlPath);
  if (m) {
    const key = decodeURIComponent(m[1]!);
    const sessionId = server.store.sessionOfKey(key);
    if (!sessionId)
      throw new ProxyHttpError(
        404,
        "invalid_request_error",
        "unknown_session",
        "no open session has this key",
      );
    if (m[2] === "/completions" && method === "GET") {
      await server.store.flush(sessionId);
      sendJson(res, 200, { session_id: sessionId, completions: server.store.records(sessionId) });
      return;
    }
    if (m[2] === "/trajectory" && method === "GET") {
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
      const task = server.store.resolveKey(key)?.meta.task_id;
      sendJson(
        res,
        200,
        build(server.store.records(sessionId), {
          session_id: sessionId,
          task_id: typeof task === "string" ? task : sessionId,
          config: config as never,
        }),
      );
      return;
    }
    if (m[2] === undefined && method === "DELETE") {
      server.replicas.forget(sessionId);
      await server.store.close(sessionId);
      sendJson(res, 200, { session_id: sessionId, closed: true });
      return;
    }
    throw notFound();
  }
  if (urlPath === "/admin/inference/pause" && method === "POST") {
    const body = await jsonBody(req);
    const t = body.timeout_ms ?? DEFAULT_PAUSE_TIMEOUT_MS;
    if (typeof t !== "number" || !Number.isFinite(t) || t < 0 || t > MAX_PAUSE_TIMEOUT_MS) {
      throw bad("timeout_ms", `must be a number of milliseconds in [0, ${MAX_PAUSE_TIMEOUT_MS}]`);
    }
    const mode = body.mode ?? "drain";
    if (mode !== "drain" && mode !== "abort") throw bad("mode", "must be 'drain' or 'abort'");
    sendJson(res, 200, await server.fence.pause({ timeoutMs: t, mode }));
    return;
  }
  if (urlPath === "/admin/inference/resume" && method === "POST") {
    server.fence.resume();
    sendJson(res, 200, server.status());
    return;
  }
  if (urlPath === "/admin/inference/status" && method === "GET") {
    sendJson(res, 200, server.status());
    return;
  }
  if (urlPath === "/admin/inference/policy_version" && method === "POST") {
    const body = await jsonBody(req);
    const v = body.policy_version;
    if (v !== null && typeof v !== "string") throw bad("policy_version", "must be a string or null");
    server.fence.setPolicyVersion(v);
    sendJson(res, 200, server.status());
    return;
  }
  throw notFound();
}
