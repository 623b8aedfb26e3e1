/**
 * Reasoning a harness drops, seen through the proxy in token mode (real Qwen3 tokenizer and
 * template, a `/generate` double choosing the sampled ids): a Gemini client that replaces the
 * `thoughtSignature` the proxy returned (as Gemini CLI does with a placeholder) and an OpenAI
 * client that sends the message back without `reasoning_content` get the next turn flagged
 * `reasoning_dropped` in the record, the session's counts and the proxy's status; a client that
 * sends everything back does not.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "../protocol";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { type RecordingProxy, startProxy } from "./server";
import { type GenerateDouble, IM_END, startGenerateDouble } from "./testing/generate-double";

const MODEL = "Qwen/Qwen3-8B";
const REASONING = "I should list the files first.";
const CALL = '<tool_call>\n{"name": "run_shell_command", "arguments": {"command": "ls"}}\n</tool_call>';

let tok: ChatTokenizer;
let engine: GenerateDouble;
let proxy: RecordingProxy;
beforeAll(async () => {
  tok = await loadChatTokenizer();
  engine = await startGenerateDouble();
  proxy = await startProxy({
    engine: "sglang",
    engineUrl: engine.url,
    modelServed: MODEL,
    logger: { info() {}, warn() {}, error() {} },
  });
}, 30_000);
afterAll(async () => {
  await proxy.close();
  await engine.close();
});

const flagsOf = (id: string) =>
  proxy.completions(id).map((r) => (r.metadata.bridge as { flags: string[] }).flags);
const sampleCallThenAnswer = () =>
  engine.queue.push(
    { output: [...tok.encode(`<think>\n${REASONING}\n</think>\n\n${CALL}`), IM_END] },
    { output: [...tok.encode("Two files."), IM_END] },
  );

describe("Gemini: a replaced thoughtSignature", () => {
  const tools = [
    {
      functionDeclarations: [
        {
          name: "run_shell_command",
          parametersJsonSchema: { type: "object", properties: { command: { type: "string" } } },
        },
      ],
    },
  ];
  const ask = (key: string, contents: JsonObject[]) =>
    fetch(`${proxy.url}/v1beta/models/m:generateContent`, {
      method: "POST",
      headers: { "x-goog-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ tools, contents }),
    }).then((r) => r.json() as Promise<{ candidates: Array<{ content: { parts: JsonObject[] } }> }>);

  /** Turn 1, then turn 2 with the model turn sent back as `echo` makes it from the returned parts. */
  async function run(id: string, echo: (parts: JsonObject[]) => JsonObject[]) {
    const { key } = proxy.openSession(id, { task_id: "t", harness: "gemini_cli" });
    sampleCallThenAnswer();
    const user = { role: "user", parts: [{ text: "List the files." }] };
    const first = await ask(key, [user]);
    const parts = first.candidates[0]!.content.parts;
    const call = parts.find((p) => p.functionCall)!.functionCall as JsonObject;
    await ask(key, [
      user,
      { role: "model", parts: echo(parts) },
      {
        role: "user",
        parts: [{ functionResponse: { id: call.id, name: call.name, response: { output: "a\nb" } } }],
      },
    ]);
    return parts;
  }

  it("sent back as returned: the signature decodes to the reasoning, no flag", async () => {
    const parts = await run("gem-kept", (p) => p);
    expect(parts.some((p) => typeof p.thoughtSignature === "string")).toBe(true);
    expect(flagsOf("gem-kept")).toEqual([[], []]);
    expect(proxy.bridgeFlags("gem-kept")).toEqual({ reasoning_dropped: 0, image_prompt_unverified: 0 });
  });

  it("with a placeholder signature: flagged, the engine still saw its <think> block", async () => {
    await run("gem-dropped", (p) =>
      p.map((x) => (x.thoughtSignature ? { ...x, thoughtSignature: "skip_thought_signature_validator" } : x)),
    );
    expect(flagsOf("gem-dropped")).toEqual([[], ["reasoning_dropped"]]);
    const [, second] = proxy.completions("gem-dropped");
    expect((second!.metadata.bridge as JsonObject).verdict).toBe("extended");
    expect(tok.decode(second!.prompt_ids)).toContain(`<think>\n${REASONING}\n</think>`);
    // The harness's own history, as the proxy read it, holds no reasoning.
    const echoed = (second!.request.messages as JsonObject[]).find((m) => m.role === "assistant")!;
    expect(echoed.reasoning_content).toBeUndefined();
    expect(proxy.bridgeFlags("gem-dropped")).toEqual({ reasoning_dropped: 1, image_prompt_unverified: 0 });
  });
});

describe("OpenAI Chat: reasoning_content left out", () => {
  it("is flagged per turn, per session and in the proxy's per-harness tally", async () => {
    const id = "chat-dropped";
    const { key } = proxy.openSession(id, { task_id: "t", harness: "cn" });
    const tools = [
      {
        type: "function",
        function: {
          name: "run_shell_command",
          parameters: { type: "object", properties: { command: { type: "string" } } },
        },
      },
    ];
    const post = (messages: JsonObject[]) =>
      fetch(`${proxy.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages, tools }),
      }).then((r) => r.json() as Promise<{ choices: Array<{ message: JsonObject }> }>);
    sampleCallThenAnswer();
    const user = { role: "user", content: "List the files." };
    const reply = (await post([user])).choices[0]!.message;
    expect(reply.reasoning_content).toBe(`${REASONING}\n`);
    const { reasoning_content: _, ...echo } = reply;
    const callId = (reply.tool_calls as Array<{ id: string }>)[0]!.id;
    await post([user, echo, { role: "tool", tool_call_id: callId, content: "a\nb" }]);
    expect(flagsOf(id)).toEqual([[], ["reasoning_dropped"]]);
    expect(proxy.bridgeFlags(id)).toEqual({ reasoning_dropped: 1, image_prompt_unverified: 0 });
    const row = proxy.status().bridge.find((r) => r.harness === "cn")!;
    expect(row).toMatchObject({ counts: { new_chain: 1, extended: 1 }, flags: { reasoning_dropped: 1 } });
  });
});
