import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { ChatMessage } from "../chat-tokenizer";
import { canonicalJson } from "../parsers/json-text";
import { normalizeMessages, prefixKeys, settingsKey } from "./normalize";

// Messages come off the wire: the tests feed shapes the ChatMessage type does not admit.
const keys = (messages: readonly unknown[], tools?: readonly unknown[]) =>
  normalizeMessages(messages as ChatMessage[], tools).map((m) => m.key);
const keyOf = (message: unknown) => keys([message])[0];
const user = (content: unknown) => ({ role: "user", content });
const sha1 = (text: string) => createHash("sha1").update(text).digest("hex");
/** The content a media part of `type` whose source is `src` flattens to. */
const media = (type: string, src: string) => `\u0000${type}:${sha1(src)}\u0000`;
const call = (args: unknown, name = "f") => ({
  id: "call_1",
  type: "function",
  function: { name, arguments: args },
});
const assistantCalling = (...calls: unknown[]) => ({ role: "assistant", content: null, tool_calls: calls });

describe("normalizeMessages: content", () => {
  it("reads text and input_text parts as their text, concatenated without a separator", () => {
    const parts = [
      { type: "text", text: "a" },
      { type: "input_text", text: "b" },
    ];
    expect(keyOf(user(parts))).toBe(keyOf(user("ab")));
    expect(keyOf(user(parts))).toBe(JSON.stringify(["user", "ab", []]));
  });

  it("reads parts that are not objects (null, an array, a string, a number) and text parts without string text as no text", () => {
    // A list that reached the bridge unchecked must not throw, and its junk must not count as text
    // or as a media part.
    const junk = [null, ["x"], "loose", 7, { type: "text" }, { type: "text", text: 5 }];
    expect(keyOf(user([...junk, { type: "input_text", text: "a" }]))).toBe(keyOf(user("a")));
    expect(keyOf(user(junk))).toBe(keyOf(user("")));
  });

  it("keys a media part by its type and the SHA-1 of its source: image_url as a string or {url}, url, source", () => {
    const shapes: Array<(url: string) => Record<string, unknown>> = [
      (url) => ({ type: "image_url", image_url: url }),
      (url) => ({ type: "image_url", image_url: { url } }),
      (url) => ({ type: "image_url", url }),
      (url) => ({ type: "image_url", source: url }),
      (url) => ({ type: "image_url", source: { url } }),
    ];
    for (const shape of shapes) {
      const content = [{ type: "text", text: "see" }, shape("https://x/1.png")];
      expect(keyOf(user(content))).toBe(
        JSON.stringify(["user", `see${media("image_url", "https://x/1.png")}`, []]),
      );
    }
  });

  it("makes a message with another image (another URL, in any of the source shapes), or without its image, compare as changed", () => {
    const variants = (url: string) => [
      { type: "image_url", image_url: url },
      { type: "image_url", image_url: { url } },
      { type: "image_url", url },
      { type: "image_url", source: url },
      { type: "image_url", source: { url } },
    ];
    const one = variants("data:image/png;base64,AAAA");
    const two = variants("data:image/png;base64,BBBB");
    one.forEach((part, i) => {
      expect(keyOf(user([part]))).not.toBe(keyOf(user([two[i]])));
      // The image is not text: dropping it changes the message too.
      expect(keyOf(user([part]))).not.toBe(keyOf(user("")));
    });
  });

  it("keys a media part with no readable source (none, an object without a string url) as one whose source is empty", () => {
    for (const part of [
      { type: "input_audio", input_audio: { data: "AAAA" } },
      { type: "image_url", image_url: {} },
      { type: "image_url", image_url: { url: 5 } },
    ]) {
      expect(keyOf(user([part]))).toBe(JSON.stringify(["user", media(part.type, ""), []]));
    }
  });
});

describe("normalizeMessages: tool calls", () => {
  it('reads "", blank, "null" and "None" argument strings, null and absent arguments as no arguments', () => {
    const none = keyOf(assistantCalling(call("{}")));
    for (const args of ["", "   ", "null", " None ", null, undefined, {}]) {
      expect(keyOf(assistantCalling(call(args)))).toBe(none);
    }
    expect(none).toBe(JSON.stringify(["assistant", "", [canonicalJson({ name: "f", arguments: {} })]]));
  });

  it("compares argument JSON parsed and canonical: surrounding whitespace, spacing and key order do not matter", () => {
    expect(keyOf(assistantCalling(call('  {"b": 1, "a": {"d": 2, "c": 3}}\n')))).toBe(
      keyOf(assistantCalling(call({ a: { c: 3, d: 2 }, b: 1 }))),
    );
    expect(keyOf(assistantCalling(call('{"a":1}')))).not.toBe(keyOf(assistantCalling(call('{"a":2}'))));
  });

  it("keys a malformed tool call (not an object, no function object) by its canonical JSON instead of throwing", () => {
    const malformed = [{ type: "function", id: "x" }, "raw", null, { function: "f" }];
    expect(keyOf(assistantCalling(...malformed))).toBe(
      JSON.stringify(["assistant", "", malformed.map((c) => canonicalJson(c))]),
    );
  });

  it("reads tool_calls on assistant messages only", () => {
    const tool = { role: "tool", tool_call_id: "call_1", content: "ok" };
    expect(keyOf({ ...tool, tool_calls: [call("{}")] })).toBe(keyOf(tool));
  });
});

describe("normalizeMessages: assistant text", () => {
  it("reads assistant text that only repeats the message's own reasoning as no text, and keeps other text", () => {
    const empty = keyOf({ role: "assistant", content: "" });
    expect(keyOf({ role: "assistant", content: " plan ", reasoning_content: "plan\n" })).toBe(empty);
    expect(keyOf({ role: "assistant", content: "answer", reasoning_content: "plan" })).toBe(
      keyOf({ role: "assistant", content: "answer" }),
    );
    expect(keyOf({ role: "assistant", content: "answer" })).not.toBe(empty);
  });

  it("keeps a user message's text even when it equals a reasoning_content it carries", () => {
    expect(keyOf({ role: "user", content: "plan", reasoning_content: "plan" })).toBe(keyOf(user("plan")));
    expect(keyOf(user("plan"))).not.toBe(keyOf(user("")));
  });

  it("merges consecutive assistant messages: texts joined by a newline, empty ones skipped, calls appended", () => {
    const split = normalizeMessages([
      { role: "user", content: "q" },
      { role: "assistant", content: "a" },
      { role: "assistant", content: "b" },
      assistantCalling(call("{}")) as ChatMessage,
    ]);
    const whole = normalizeMessages([
      { role: "user", content: "q" },
      { role: "assistant", content: "a\nb", tool_calls: [call("{}")] as ChatMessage["tool_calls"] },
    ]);
    expect(split.map((m) => m.key)).toEqual(whole.map((m) => m.key));
    expect(split.map((m) => m.rawEnd)).toEqual([0, 3]);
  });

  it("counts chars as the text's length plus each tool call key's", () => {
    const [m] = normalizeMessages([
      { role: "assistant", content: "abc", tool_calls: [call('{"x":1}'), call("{}", "g")] } as ChatMessage,
    ]);
    const calls = [
      canonicalJson({ name: "f", arguments: { x: 1 } }),
      canonicalJson({ name: "g", arguments: {} }),
    ];
    expect(m!.chars).toBe(3 + calls[0]!.length + calls[1]!.length);
  });
});

describe("prefixKeys", () => {
  it("gives keys[j] for messages 0..j: equal while two lists agree, different from the first change on", () => {
    const a = prefixKeys(normalizeMessages([user("q1"), user("q2"), user("q3")] as ChatMessage[]));
    const b = prefixKeys(normalizeMessages([user("q1"), user("other"), user("q3")] as ChatMessage[]));
    expect(a).toHaveLength(3);
    expect(a[0]).toBe(b[0]);
    expect(a[1]).not.toBe(b[1]);
    expect(a[2]).not.toBe(b[2]);
    expect(prefixKeys([])).toEqual([]);
  });
});

describe("settingsKey", () => {
  const tool = (name: string) => ({ type: "function", function: { name, parameters: { type: "object" } } });

  it("reads absent tools and kwargs as empty ones", () => {
    expect(settingsKey(undefined, undefined)).toBe(settingsKey([], {}));
    expect(settingsKey(undefined, undefined)).toBe("[[],{}]");
  });

  it("differs when the tools or the template kwargs differ, not when only key order does", () => {
    expect(settingsKey([tool("a")], undefined)).not.toBe(settingsKey([tool("b")], undefined));
    expect(settingsKey([tool("a")], undefined)).not.toBe(settingsKey(undefined, undefined));
    expect(settingsKey(undefined, { enable_thinking: false })).not.toBe(
      settingsKey(undefined, { enable_thinking: true }),
    );
    expect(settingsKey(undefined, { enable_thinking: false })).not.toBe(settingsKey(undefined, undefined));
    expect(settingsKey([], { a: 1, b: 2 })).toBe(settingsKey([], { b: 2, a: 1 }));
  });
});
