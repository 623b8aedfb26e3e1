/**
 * The context length token mode uses: read from the engine at start (`/v1/models`, else
 * `/server_info`), a disagreeing `--context-length` refused naming both values, the configured or
 * default value kept (and said) when the engine cannot tell; and the near-full-context turn that
 * this makes the harness's `context_length_exceeded` instead of an engine 400.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimEngineHandle, startSimEngine } from "../../../sim/server";
import { loadChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import { startProxy } from "../../server";
import { ContextLengthError, engineContextLength, resolveContextLength } from "./context-length";
import { DEFAULT_CONTEXT_LENGTH } from "./mode";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };

/** An engine that answers only the given GET routes (everything else 404). */
async function startStub(routes: Record<string, unknown>): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const body = routes[req.url ?? ""];
    res.writeHead(body === undefined ? 404 : 200, { "content-type": "application/json" });
    res.end(JSON.stringify(body ?? { error: "no route" }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(() => r())) };
}

let sim: SimEngineHandle;
beforeAll(async () => {
  sim = await startSimEngine({ model: MODEL, contextLength: 512 });
}, 30_000);
afterAll(async () => {
  await sim.close();
});

describe("reading the engine's context length", () => {
  it("takes /v1/models max_model_len, else /server_info context_length, else says it cannot", async () => {
    expect(await engineContextLength(sim.url)).toEqual({
      url: sim.url,
      contextLength: 512,
      source: "GET /v1/models data[0].max_model_len",
    });
    // SGLang's /server_info context_length is the launch argument: null unless --context-length.
    const info = await startStub({ "/server_info": { context_length: 8192 } });
    const unset = await startStub({ "/server_info": { context_length: null }, "/model_info": {} });
    try {
      expect((await engineContextLength(info.url))?.contextLength).toBe(8192);
      expect(await engineContextLength(unset.url)).toBeNull();
      expect(await engineContextLength("http://127.0.0.1:9", { timeoutMs: 500 })).toBeNull();
    } finally {
      await info.close();
      await unset.close();
    }
  });

  it("uses the engine's value, refuses a configured one that differs naming both, and logs which it took", async () => {
    const lines: string[] = [];
    const logger = { info: (m: string) => lines.push(m), warn() {}, error() {} };
    expect(await resolveContextLength({ urls: [sim.url], fallback: DEFAULT_CONTEXT_LENGTH, logger })).toBe(
      512,
    );
    expect(lines.at(-1)).toMatch(/context length 512 from the engine \(GET \/v1\/models/);
    expect(await resolveContextLength({ configured: 512, urls: [sim.url], fallback: 1 })).toBe(512);
    const wrong = resolveContextLength({ configured: 4096, urls: [sim.url], fallback: 1 });
    await expect(wrong).rejects.toBeInstanceOf(ContextLengthError);
    await expect(wrong).rejects.toThrow(/--context-length is 4096 but the engine at .* reports 512/);

    const silent = await startStub({});
    try {
      expect(
        await resolveContextLength({ configured: 4096, urls: [silent.url], fallback: 40_960, logger }),
      ).toBe(4096);
      expect(lines.at(-1)).toMatch(/does not report its context length; using the configured 4096/);
      expect(await resolveContextLength({ urls: [silent.url], fallback: 40_960, logger })).toBe(40_960);
      expect(lines.at(-1)).toMatch(/using the default 40960/);
    } finally {
      await silent.close();
    }
  });

  it("refuses replicas that disagree", async () => {
    const other = await startStub({ "/v1/models": { data: [{ id: MODEL, max_model_len: 1024 }] } });
    try {
      await expect(
        resolveContextLength({ urls: [sim.url, other.url], fallback: DEFAULT_CONTEXT_LENGTH }),
      ).rejects.toThrow(/disagree on the context length: .* reports 512, .* reports 1024/);
    } finally {
      await other.close();
    }
  });
});

describe("the proxy at start and at the context limit", () => {
  it("refuses to start with a --context-length the engine contradicts", async () => {
    await expect(
      startProxy({
        engine: "sglang",
        engineUrl: sim.url,
        modelServed: MODEL,
        contextLength: 40_960,
        logger: quiet,
      }),
    ).rejects.toThrow(/contextLength: --context-length is 40960 but the engine at .* reports 512/);
  });

  it("learns the engine's context and keeps near-full-context turns out of the engine's 400", async () => {
    const proxy = await startProxy({
      engine: "sglang",
      engineUrl: sim.url,
      modelServed: MODEL,
      logger: quiet,
    });
    try {
      const tok = await loadChatTokenizer();
      const { key } = proxy.openSession("ctx-1", {});
      const post = (content: string, extra: Record<string, unknown> = {}) =>
        fetch(`${proxy.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content }], ...extra }),
        }).then(async (r) => ({ status: r.status, json: (await r.json()) as { error?: { code?: string } } }));
      // A prompt of exactly 511 tokens: SGLang (and the sim) refuse any max_new_tokens for it.
      const render = (n: number) =>
        tok.encode(tok.render([{ role: "user", content: "hi ".repeat(n) }], { addGenerationPrompt: true }))
          .length;
      let words = 1;
      while (render(words) < 511) words++;
      expect(render(words)).toBe(511);
      const full = await post("hi ".repeat(words));
      expect(full.status).toBe(400);
      expect(full.json.error?.code).toBe("context_length_exceeded");
      // One token shorter, asking for far more than fits: clamped under the rule, answered.
      const fits = await post("hi ".repeat(words - 1), { max_tokens: 100_000 });
      expect(fits.status).toBe(200);
    } finally {
      await proxy.close();
    }
  });
});
