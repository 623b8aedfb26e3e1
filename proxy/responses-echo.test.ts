/**
 * Responses reasoning items as real clients send them back, replayed from recordings: each fixture
 * in `testing/fixtures/` holds the request bodies one CLI sent through the proxy (token mode, the
 * simulated engine, the calculator task), with the fields every request shares kept once. Replayed
 * in order under the recorded session id, the simulated policy samples the same turns again, so
 * each request echoes what the proxy just returned and the bridge's verdicts are those of the run.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../protocol";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { type RecordingProxy, startProxy } from "./server";

interface Fixture {
  cli: string;
  session_id: string;
  common: JsonObject;
  requests: JsonObject[];
}
const fixture = (name: string): Fixture =>
  JSON.parse(readFileSync(join(__dirname, "testing/fixtures", name), "utf8")) as Fixture;

const MODEL = "Qwen/Qwen3-0.6B";
let sim: SimEngineHandle;
let proxy: RecordingProxy;
let tok: ChatTokenizer;
beforeAll(async () => {
  [sim, tok] = await Promise.all([startSimEngine({ model: MODEL }), loadChatTokenizer()]);
  proxy = await startProxy({
    engine: "sglang",
    engineUrl: sim.url,
    modelServed: MODEL,
    logger: { info() {}, warn() {}, error() {} },
    healthIntervalMs: 0,
  });
}, 30_000);
afterAll(async () => {
  await proxy?.close();
  await sim?.close();
});

/** Replays a recording; returns the SSE text of each answer. */
async function replay(f: Fixture): Promise<string[]> {
  const { key } = proxy.openSession(f.session_id, { harness: f.cli });
  const answers: string[] = [];
  for (const r of f.requests) {
    const res = await fetch(`${proxy.url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...f.common, ...r }),
    });
    expect(res.status).toBe(200);
    answers.push(await res.text());
  }
  return answers;
}

const verdicts = (id: string) =>
  proxy.completions(id).map((r) => (r.metadata.bridge as { verdict: string }).verdict);

/** The reasoning items of a streamed answer, as `response.completed` lists them. */
function reasoningItems(sse: string): JsonObject[] {
  const done = sse
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => JSON.parse(l.slice(6)) as { type: string; response?: { output: JsonObject[] } })
    .find((e) => e.type === "response.completed");
  return (done?.response?.output ?? []).filter((i) => i.type === "reasoning");
}

describe.each([
  ["responses-codex.json", "Codex"],
  ["responses-copilot.json", "Copilot CLI"],
])("%s (%s, recorded with today's reasoning items)", (file) => {
  it("every follow-up is extended; the reasoning items carry summary and token, no content", async () => {
    const f = fixture(file);
    const answers = await replay(f);
    expect(verdicts(f.session_id)).toEqual(["new_chain", "extended", "extended", "extended"]);
    for (const sse of answers)
      for (const item of reasoningItems(sse)) {
        expect(item.content).toBeUndefined();
        expect(item.summary).toEqual([{ type: "summary_text", text: expect.any(String) }]);
        expect(typeof item.encrypted_content).toBe("string");
      }
    expect(answers.flatMap(reasoningItems).length).toBe(f.requests.length);
  });
});

describe("Copilot CLI echoing a reasoning_text item as an assistant message too", () => {
  it("the bridge reads the repeated text as the reasoning: extended, the engine sees it once", async () => {
    const f = fixture("responses-copilot-reasoning-text.json");
    // The recording: the reasoning item comes back with its content, then a message with the same text.
    const second = f.requests[1]!.input as JsonObject[];
    const [item, message] = [second[1]!, second[2]!];
    expect(item).toMatchObject({ type: "reasoning", content: [{ type: "reasoning_text" }] });
    const text = (item.summary as Array<{ text: string }>)[0]!.text;
    expect(message).toMatchObject({ type: "message", role: "assistant", content: [{ text }] });
    await replay(f);
    expect(verdicts(f.session_id)).toEqual(["new_chain", "extended", "extended", "extended"]);
    const prompt = tok.decode(proxy.completions(f.session_id)[1]!.prompt_ids);
    expect(prompt.split(text.trim()).length - 1).toBe(1);
  });
});
