/**
 * Image turns in token mode against the simulated engine serving a Qwen-VL style template (the
 * sim's processor expands each `<|image_pad|>` as SGLang's Qwen-VL processor does): the records
 * and the conversation trace hold the ids the engine ran, the sent ids are kept beside them, and
 * an engine that returns no prompt ids (an SGLang ignoring `return_prompt_token_ids`) gets every
 * image turn flagged `image_prompt_unverified`.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { starImage } from "../../../examples/count_stars/stars.mjs";
import { CompletionRecord, type JsonObject } from "../../../protocol";
import { type SimEngineHandle, startSimEngine } from "../../../sim/server";
import { vlTokenizerDir } from "../../../sim/vl-tokenizer";
import { type ChatTokenizer, loadChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import { getBuilder } from "../../builders";
import { type RecordingProxy, startProxy } from "../../server";

const MODEL = "Qwen/Qwen3-VL-test";
const quiet = { info() {}, warn() {}, error() {} };
const png = (stars: number, seed: number) =>
  `data:image/png;base64,${starImage({ stars, seed }).png.toString("base64")}`;

let tok: ChatTokenizer;
let PAD: number;
let sim: SimEngineHandle;
let proxy: RecordingProxy;
/** In front of the sim: `/generate` answers lose `prompt_token_ids`, as on an older SGLang. */
let older: Server;
let olderProxy: RecordingProxy;

beforeAll(async () => {
  const dir = vlTokenizerDir();
  tok = await loadChatTokenizer(dir);
  PAD = tok.tokenId("<|image_pad|>")!;
  sim = await startSimEngine({ model: MODEL, tokenizerDir: dir });
  proxy = await startProxy({
    engine: "sglang",
    engineUrl: sim.url,
    modelServed: MODEL,
    tokenizerPath: dir,
    logger: quiet,
  });
  older = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const up = await fetch(`${sim.url}${req.url}`, {
      method: req.method!,
      headers: { "content-type": req.headers["content-type"] ?? "application/json" },
      ...(req.method === "GET" || req.method === "HEAD" ? {} : { body: Buffer.concat(chunks) }),
    });
    let body = await up.text();
    if (req.url === "/generate" && up.ok) {
      const json = JSON.parse(body) as JsonObject;
      delete json.prompt_token_ids;
      body = JSON.stringify(json);
    }
    res.writeHead(up.status, { "content-type": up.headers.get("content-type") ?? "application/json" });
    res.end(body);
  });
  await new Promise<void>((resolve) => older.listen(0, "127.0.0.1", resolve));
  olderProxy = await startProxy({
    engine: "sglang",
    engineUrl: `http://127.0.0.1:${(older.address() as AddressInfo).port}`,
    modelServed: MODEL,
    tokenizerPath: dir,
    logger: quiet,
  });
}, 30_000);
afterAll(async () => {
  await olderProxy.close();
  await new Promise((resolve) => older.close(resolve));
  await proxy.close();
  await sim.close();
});

const pads = (ids: readonly number[]) => ids.filter((id) => id === PAD).length;
const bridgeOf = (r: CompletionRecord) => r.metadata.bridge as JsonObject;

/** Three turns: an image, a follow-up without a new image, a second image. */
async function session(p: RecordingProxy, id: string): Promise<CompletionRecord[]> {
  const { key } = p.openSession(id, { harness: "scripted" });
  const openai = new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 });
  const question = {
    type: "text" as const,
    text: "How many stars are in this image? Reply with just the number.",
  };
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: "user", content: [question, { type: "image_url", image_url: { url: png(3, 1) } }] },
  ];
  for (const next of [
    { role: "user" as const, content: "Are you sure?" },
    {
      role: "user" as const,
      content: [question, { type: "image_url" as const, image_url: { url: png(5, 2) } }],
    },
    null,
  ]) {
    const r = await openai.chat.completions.create({ model: "m", messages, temperature: 0 });
    if (!next) break;
    // The whole reply goes back (with its reasoning), as a harness that keeps it does.
    messages.push(r.choices[0]!.message, next);
  }
  return p.completions(id).map((r) => CompletionRecord.parse(r));
}

describe("image turns in token mode against the simulated engine", () => {
  it("records the engine's expanded ids; the conversation trace is one sequence in the engine's space", async () => {
    const rs = await session(proxy, "img-exact");
    expect(rs).toHaveLength(3);
    // 160×120 star pictures: 24 pads each in the engine's prompt, one in what was sent.
    expect(rs.map((r) => pads(r.prompt_ids))).toEqual([24, 24, 48]);
    expect(rs.map((r) => pads(r.metadata.sent_prompt_ids as number[]))).toEqual([1, 1, 2]);
    for (const r of rs) {
      const sent = r.metadata.sent_prompt_ids as number[];
      expect(r.prompt_ids.filter((id) => id !== PAD)).toEqual(sent.filter((id) => id !== PAD));
      expect((r.response.meta_info as JsonObject).prompt_tokens).toBe(r.prompt_ids.length);
      expect((r.response.usage as JsonObject).prompt_tokens).toBe(r.prompt_ids.length);
      expect(bridgeOf(r).flags).toEqual([]);
      expect(r.metadata.engine_prompt_ids).toBeUndefined();
    }
    // Every request sent one pad per image again (SGLang expands each request itself).
    const generate = rs[2]!.request.generate as JsonObject;
    expect((generate.image_data as unknown[]).length).toBe(2);
    expect(rs.slice(1).map((r) => bridgeOf(r).parent_turn_id)).toEqual(
      rs.slice(0, 2).map((r) => bridgeOf(r).turn_id),
    );
    expect(proxy.bridgeFlags("img-exact")).toEqual({ reasoning_dropped: 0, image_prompt_unverified: 0 });

    const t = getBuilder("conversation")(rs, { session_id: "img-exact", task_id: "t", config: {} });
    expect(t.traces).toHaveLength(1);
    const trace = t.traces[0]!;
    const last = rs[2]!;
    expect([...trace.prompt_ids, ...trace.response_ids]).toEqual([...last.prompt_ids, ...last.response_ids]);
    expect(trace.prompt_ids).toEqual(rs[0]!.prompt_ids);
    expect(trace.metadata.token_exact).toBe(true);
    const trained = trace.loss_mask.reduce((n: number, m) => n + m, 0);
    expect(trained).toBe(rs.reduce((n, r) => n + r.response_ids.length, 0));
  });

  it("flags every image turn when the engine returns no prompt ids; the trace says it is not token-exact", async () => {
    const rs = await session(olderProxy, "img-older");
    expect(rs.map((r) => bridgeOf(r).flags)).toEqual([
      ["image_prompt_unverified"],
      ["image_prompt_unverified"],
      ["image_prompt_unverified"],
    ]);
    // What was sent is all that is known: one pad per image.
    expect(rs.map((r) => pads(r.prompt_ids))).toEqual([1, 1, 2]);
    expect(rs.every((r) => r.metadata.sent_prompt_ids === undefined)).toBe(true);
    expect(olderProxy.bridgeFlags("img-older")).toEqual({ reasoning_dropped: 0, image_prompt_unverified: 3 });
    const t = getBuilder("conversation")(rs, { session_id: "img-older", task_id: "t", config: {} });
    expect(t.metadata.flags).toEqual({ reasoning_dropped: 0, image_prompt_unverified: 3 });
    expect(t.traces).toHaveLength(1);
    expect(t.traces[0]!.metadata.token_exact).toBe(false);
  });
});
