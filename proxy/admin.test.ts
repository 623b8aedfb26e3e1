import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Logger } from "../protocol";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { type RecordingProxy, startProxy } from "./server";

const TOKEN = "admin-secret";
const quiet: Logger = { info() {}, warn() {}, error() {} };
let engine: SimEngineHandle;
let proxy: RecordingProxy;

beforeAll(async () => {
  engine = await startSimEngine({ model: "m" });
  proxy = await startProxy({
    engine: "sglang-openai",
    engineUrl: engine.url,
    modelServed: "m",
    adminToken: TOKEN,
    logger: quiet,
    healthIntervalMs: 0,
  });
});
afterAll(async () => {
  await proxy.close();
  await engine.close();
});

/** One admin call: status and parsed JSON body. */
async function admin(method: string, url: string, body?: unknown, token = TOKEN) {
  const res = await fetch(`${proxy.url}${url}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, type: res.headers.get("content-type"), body: text ? JSON.parse(text) : null };
}

describe("proxy admin API routing", () => {
  it("refuses a wrong token with 401 before looking at the route", async () => {
    for (const [method, url] of [
      ["POST", "/sessions"],
      ["GET", "/admin/nothing-here"],
      ["HEAD", "/admin/inference/status"],
    ] as const) {
      const r = await fetch(`${proxy.url}${url}`, { method, headers: { authorization: "Bearer nope" } });
      expect(r.status, `${method} ${url}`).toBe(401);
    }
    const r = await admin("GET", "/admin/inference/status", undefined, "nope");
    expect(r.body.error).toMatchObject({ code: "invalid_admin_token", type: "invalid_request_error" });
  });

  it("answers an unknown route or method with 404 not_found naming both", async () => {
    const r = await admin("GET", "/sessions");
    expect(r).toMatchObject({ status: 404, type: "application/json" });
    expect(r.body.error).toMatchObject({ code: "not_found", message: "no route for GET /sessions" });
    expect((await admin("PUT", "/admin/inference/status")).body.error.message).toBe(
      "no route for PUT /admin/inference/status",
    );
    // HEAD is no alias of GET here.
    const head = await fetch(`${proxy.url}/admin/inference/status`, {
      method: "HEAD",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(head.status).toBe(404);
    // Trailing slashes are stripped before routing.
    expect((await admin("GET", "/admin/inference/status/")).status).toBe(200);
  });

  it("refuses an unknown session key with 404 unknown_session, whatever the method", async () => {
    for (const [method, url] of [
      ["GET", "/sessions/no-such-key/completions"],
      ["POST", "/sessions/no-such-key/completions"],
      ["DELETE", "/sessions/no-such-key"],
    ] as const) {
      const r = await admin(method, url);
      expect(r.status, `${method} ${url}`).toBe(404);
      expect(r.body.error.code).toBe("unknown_session");
    }
    // A path that is no session route is not_found, not unknown_session.
    expect((await admin("GET", "/sessions/no-such-key/other")).body.error.code).toBe("not_found");
  });

  it("opens, reads and closes a session; a second open of the id is 409", async () => {
    const opened = await admin("POST", "/sessions", { session_id: "adm-1" });
    expect(opened.status).toBe(201);
    expect(opened.body).toMatchObject({ session_id: "adm-1", dir: null });
    expect(opened.body.base_url).toBe(proxy.url);
    const again = await admin("POST", "/sessions", { session_id: "adm-1" });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({
      code: "session_exists",
      message: "session_id: 'adm-1' is already open",
    });
    const key = encodeURIComponent(opened.body.key);
    expect((await admin("POST", `/sessions/${key}/completions`)).body.error.code).toBe("not_found");
    expect(await admin("GET", `/sessions/${key}/completions`)).toMatchObject({
      status: 200,
      body: { session_id: "adm-1", completions: [] },
    });
    const bad = await admin("GET", `/sessions/${key}/trajectory?config=[1]`);
    expect(bad).toMatchObject({ status: 400, body: { error: { param: "config" } } });
    expect(await admin("DELETE", `/sessions/${key}`)).toMatchObject({
      status: 200,
      body: { session_id: "adm-1", closed: true },
    });
    expect((await admin("GET", `/sessions/${key}/completions`)).body.error.code).toBe("unknown_session");
  });

  it("names the field of a bad body, and a body that is no JSON object", async () => {
    expect((await admin("POST", "/sessions", { meta: 3 })).body.error).toMatchObject({
      param: "meta",
      message: "meta: must be an object",
    });
    expect((await admin("POST", "/admin/inference/pause", { mode: "stop" })).body.error.param).toBe("mode");
    expect((await admin("POST", "/admin/inference/policy_version", { policy_version: 1 })).status).toBe(400);
    const list = await admin("POST", "/admin/inference/pause", [1]);
    expect(list).toMatchObject({
      status: 400,
      body: { error: { message: "(body): must be a JSON object" } },
    });
  });

  it("pauses, stamps a policy version and resumes the fence", async () => {
    expect(await admin("POST", "/admin/inference/pause", { timeout_ms: 1000 })).toMatchObject({
      status: 200,
      body: { drained: true, inflight: 0 },
    });
    expect((await admin("GET", "/admin/inference/status")).body).toMatchObject({ paused: true });
    expect(
      (await admin("POST", "/admin/inference/policy_version", { policy_version: "7" })).body,
    ).toMatchObject({
      policy_version: "7",
    });
    expect((await admin("POST", "/admin/inference/resume")).body).toMatchObject({ paused: false });
  });
});
