import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ChatTemplateError,
  type ChatTokenizer,
  defaultTokenizerDir,
  loadChatTokenizer,
  TokenizerLoadError,
} from "./chat-tokenizer";

let tok: ChatTokenizer;
beforeAll(async () => {
  tok = await loadChatTokenizer();
}, 30_000);

describe("default Qwen3 tokenizer", () => {
  it("is cached: the same instance for the default folder", async () => {
    expect(await loadChatTokenizer()).toBe(tok);
    expect(await loadChatTokenizer(defaultTokenizerDir())).toBe(tok);
  });

  it("renders and encodes a system/user conversation in the Qwen3 layout", () => {
    const text = tok.render([
      { role: "system", content: "You are brief." },
      { role: "user", content: "What is 17 * 23?" },
    ]);
    expect(text).toBe(
      "<|im_start|>system\nYou are brief.<|im_end|>\n<|im_start|>user\nWhat is 17 * 23?<|im_end|>\n<|im_start|>assistant\n",
    );
    const ids = tok.encode(text);
    // <|im_start|> system \n ... <|im_end|> \n <|im_start|> assistant \n
    expect(ids.slice(0, 3)).toEqual([151644, 8948, 198]);
    expect(ids.slice(-3)).toEqual([151644, 77091, 198]);
    expect(ids.filter((id) => id === 151645)).toHaveLength(2);
    expect(tok.decode(ids)).toBe(text);
  });

  it("knows <|im_end|> and uses it as end of turn", () => {
    expect(tok.tokenId("<|im_end|>")).toBe(151645);
    expect(tok.tokenId("<think>")).toBe(151667);
    expect(tok.tokenId("no such token, surely")).toBeUndefined();
    expect(tok.eosTokenIds).toEqual([151645]);
    expect(tok.vocabSize).toBe(151669);
  });

  it("reproduces BPE drift: ' fish' + 'ing' decodes to ' fishing', which encodes to one token", () => {
    expect(tok.decode([7640, 287])).toBe(" fishing");
    expect(tok.encode(" fishing")).toEqual([19948]);
  });

  it("decodes [] to '' and skips only special tokens on request", () => {
    expect(tok.decode([])).toBe("");
    const ids = tok.encode("<think>\nhm\n</think>\n\nok<|im_end|>");
    expect(ids.at(-1)).toBe(151645);
    expect(tok.decode(ids, { skipSpecialTokens: true })).toBe("<think>\nhm\n</think>\n\nok");
    expect(tok.isSpecialId(151645)).toBe(true);
    expect(tok.isSpecialId(151667)).toBe(false);
  });

  it("renders tool calls whose arguments are JSON strings as objects, like SGLang", () => {
    const tools = [
      {
        type: "function",
        function: { name: "calc", description: "Evaluate", parameters: { type: "object", properties: {} } },
      },
    ];
    const asString = tok.render(
      [
        { role: "user", content: "17*23?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "calc", arguments: '{"expr":"17*23"}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "391" },
      ],
      { tools },
    );
    expect(asString).toContain(
      '<|im_start|>assistant\n<tool_call>\n{"name": "calc", "arguments": {"expr": "17*23"}}\n</tool_call><|im_end|>\n',
    );
    expect(asString).toContain("<|im_start|>user\n<tool_response>\n391\n</tool_response><|im_end|>\n");
    expect(asString).toContain('<tools>\n{"type": "function", "function": {"name": "calc"');
    const asObject = tok.render(
      [
        { role: "user", content: "17*23?" },
        {
          role: "assistant",
          content: "",
          tool_calls: [{ function: { name: "calc", arguments: { expr: "17*23" } } }],
        },
        { role: "tool", content: "391" },
      ],
      { tools },
    );
    expect(asObject).toBe(asString);
  });

  it("names the field when tool-call arguments are not JSON", () => {
    const bad = () =>
      tok.render([
        { role: "user", content: "x" },
        { role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: "{oops" } }] },
      ]);
    expect(bad).toThrow(ChatTemplateError);
    expect(bad).toThrow(/messages\[1\]\.tool_calls\[0\]\.function\.arguments: not valid JSON/);
  });

  it("flattens text content parts with a space and drops images (string template)", () => {
    const text = tok.render(
      [
        {
          role: "user",
          content: [
            { type: "text", text: "Look:" },
            { type: "image_url", image_url: { url: "data:," } },
            { type: "text", text: "what is it?" },
          ],
        },
      ],
      { addGenerationPrompt: false },
    );
    expect(text).toBe("<|im_start|>user\nLook: what is it?<|im_end|>\n");
  });

  it("keeps reasoning of the last turn and drops it before a new user query (Qwen3 history rewrite)", () => {
    const turn1 = [
      { role: "user", content: "Q1" },
      { role: "assistant", content: "A1", reasoning_content: "think 1" },
    ];
    const kept = tok.render(turn1, { addGenerationPrompt: false });
    expect(kept).toContain("<|im_start|>assistant\n<think>\nthink 1\n</think>\n\nA1<|im_end|>\n");
    const next = tok.render([...turn1, { role: "user", content: "Q2" }]);
    expect(next).toContain("<|im_start|>assistant\nA1<|im_end|>\n");
    expect(next).not.toContain("think 1");
  });

  it("passes template kwargs: enable_thinking=false pre-fills an empty think block", () => {
    const text = tok.render([{ role: "user", content: "hi" }], {
      templateKwargs: { enable_thinking: false },
    });
    expect(text.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
  });
});

describe("loading other folders", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "polar-tok-"));
    const src = defaultTokenizerDir();
    await copyFile(path.join(src, "tokenizer.json"), path.join(dir, "tokenizer.json"));
    const config = JSON.parse(await readFile(path.join(src, "tokenizer_config.json"), "utf8"));
    config.name_or_path = "test/custom-model";
    await writeFile(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
    await writeFile(
      path.join(dir, "chat_template.jinja"),
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}",
    );
    await writeFile(
      path.join(dir, "generation_config.json"),
      JSON.stringify({ eos_token_id: [151645, 151643] }),
    );
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("prefers chat_template.jinja, reads name and generation_config eos ids", async () => {
    const custom = await loadChatTokenizer(dir);
    expect(custom).not.toBe(tok);
    expect(custom.name).toBe("test/custom-model");
    expect(custom.render([{ role: "user", content: "hi" }])).toBe("[user] hi\n[assistant] ");
    expect(custom.eosTokenIds).toEqual([151645, 151643]);
    expect(custom.encode(" fishing")).toEqual([19948]);
  }, 30_000);

  it("fails with TokenizerLoadError on a folder without tokenizer files", async () => {
    const empty = await mkdtemp(path.join(os.tmpdir(), "polar-tok-empty-"));
    try {
      await expect(loadChatTokenizer(empty)).rejects.toThrow(TokenizerLoadError);
      await expect(loadChatTokenizer(empty)).rejects.toThrow(/tokenizer\.json/);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
