import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimRouterHandle, startSimRouter } from "./router";
import { type SimEngineHandle, startSimEngine } from "./server";

let a: SimEngineHandle;
let b: SimEngineHandle;
const routers: SimRouterHandle[] = [];
beforeAll(async () => {
  [a, b] = await Promise.all([startSimEngine(), startSimEngine()]);
});
afterAll(async () => {
  await Promise.all(routers.map((r) => r.close()));
  await Promise.all([a.close(), b.close()]);
});

async function router(opts: Omit<Parameters<typeof startSimRouter>[0], "workers">): Promise<SimRouterHandle> {
  const r = await startSimRouter({ workers: [a.url, b.url], ...opts });
  routers.push(r);
  return r;
}

async function generate(r: SimRouterHandle, key: string): Promise<number> {
  const res = await fetch(`${r.url}/generate`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-smg-routing-key": key },
    body: JSON.stringify({ text: "What is 2 + 2?", sampling_params: { max_new_tokens: 8 } }),
  });
  await res.json();
  return res.status;
}

describe("simulated SGLang router", () => {
  it("lists DP-aware workers as url@rank and gRPC workers with their connection mode", async () => {
    const r = await router({ dpSize: 2, grpcWorkers: ["grpc://10.0.0.9:50051"] });
    const body = (await (await fetch(`${r.url}/workers`)).json()) as {
      workers: Array<{ url: string; connection_mode: string; worker_type: string }>;
      total: number;
    };
    expect(body.workers.map((w) => [w.url, w.connection_mode])).toEqual([
      [`${a.url}@0`, "HTTP"],
      [`${a.url}@1`, "HTTP"],
      [`${b.url}@0`, "HTTP"],
      [`${b.url}@1`, "HTTP"],
      ["grpc://10.0.0.9:50051", "gRPC"],
    ]);
    expect(body.total).toBe(5);
  });

  it("cache_aware (the default) ignores X-SMG-Routing-Key; consistent_hashing and manual honour it", async () => {
    const cacheAware = await router({});
    for (let i = 0; i < 4; i++) expect(await generate(cacheAware, "same-session")).toBe(200);
    expect(cacheAware.forwarded.size).toBe(2);
    for (const policy of ["consistent_hashing", "manual"] as const) {
      const r = await router({ policy });
      for (let i = 0; i < 4; i++) await generate(r, "same-session");
      expect([...r.forwarded.values()]).toEqual([4]);
    }
  });

  it("serves /parse/function_call and /parse/reasoning in the router's shapes and names", async () => {
    const r = await router({});
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${r.url}${path}`, { method: "POST", body: JSON.stringify(body) });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const tools = [{ type: "function", function: { name: "calc" } }];
    const text = '<tool_call>\n{"name": "calc", "arguments": {"x": 1}}\n</tool_call>';
    expect((await post("/parse/function_call", { text, tool_call_parser: "qwen", tools })).json).toEqual({
      remaining_text: "",
      tool_calls: [{ function: { name: "calc", arguments: '{"x": 1}' } }],
      success: true,
    });
    const bad = await post("/parse/function_call", { text, tool_call_parser: "qwen25", tools });
    expect(bad).toEqual({ status: 400, json: { error: "Unknown tool parser: qwen25", success: false } });
    expect(
      (await post("/parse/reasoning", { text: "hm</think>ok", reasoning_parser: "qwen3_thinking" })).json,
    ).toEqual({ normal_text: "ok", reasoning_text: "hm", success: true });
    expect((await post("/parse/reasoning", { text: "x", reasoning_parser: "qwen3-thinking" })).status).toBe(
      400,
    );
  });

  it("has no /abort_request: its fallback answers 404 with an empty body", async () => {
    const r = await router({});
    const res = await fetch(`${r.url}/abort_request`, { method: "POST", body: JSON.stringify({ rid: "x" }) });
    expect(res.status).toBe(404);
    expect(await res.text()).toBe("");
    expect(r.notFound).toEqual(["POST /abort_request"]);
    expect(await (await fetch(`${r.url}/health`)).text()).toBe("OK");
  });
});
