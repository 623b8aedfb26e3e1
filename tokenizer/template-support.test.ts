/**
 * A chat template using a feature the renderer (`@huggingface/jinja`) lacks fails when it is
 * loaded, naming the feature and the file, whether the feature is a tag (a parse error), a name
 * found in the template (filters, tests, methods, functions: even on a branch no probe reaches), or
 * only seen when a probe conversation is rendered. A template's own `raise_exception` is not a gap.
 */
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Template } from "@huggingface/jinja";
import { describe, expect, it } from "vitest";
import {
  ChatTemplateError,
  defaultTokenizerDir,
  loadChatTokenizer,
  TokenizerLoadError,
  UnsupportedTemplateFeatureError,
} from "./chat-tokenizer";
import { DEEPSEEK_V3_TOOL_TEMPLATE } from "./families/deepseek-v3-template";
import { templateRaises, unsupportedFeature } from "./template-support";
import { MISTRAL_LIKE_TEMPLATE, modelFolderWith } from "./test-folder";

/** A template that renders every message and closes each with the end-of-turn token. */
const around = (inner: string) =>
  `{%- for message in messages -%}${inner}{{- message.content -}}{{- eos_token -}}{%- endfor -%}`;
/** Reached by no probe: the probes hold fewer than 99 messages. */
const unreached = (inner: string) => around(`{%- if messages | length > 99 -%}${inner}{%- endif -%}`);

async function loadError(template: string): Promise<{ error: UnsupportedTemplateFeatureError; dir: string }> {
  const dir = modelFolderWith(template);
  const error = await loadChatTokenizer(dir).then(
    () => {
      throw new Error("the template loaded");
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UnsupportedTemplateFeatureError);
  return { error: error as UnsupportedTemplateFeatureError, dir };
}

const qwen3Template = () =>
  (
    JSON.parse(readFileSync(path.join(defaultTokenizerDir(), "tokenizer_config.json"), "utf8")) as {
      chat_template: string;
    }
  ).chat_template;

describe("chat template features the renderer lacks fail at load, naming the feature and the file", () => {
  it("a tag: {% do %}", async () => {
    const { error, dir } = await loadError(around("{%- do messages.append(message) -%}"));
    expect(error.feature).toBe("tag {% do %}");
    expect(error.file).toBe(path.join(dir, "chat_template.jinja"));
    expect(error.source).toBe("folder");
    expect(error).toBeInstanceOf(TokenizerLoadError);
    expect(error.message).toBe(
      `the chat template ${path.join(dir, "chat_template.jinja")} uses tag {% do %}, which the proxy's template renderer (@huggingface/jinja) does not support`,
    );
  });

  it("a filter, a test, a method and a function, on a branch no probe conversation reaches", async () => {
    expect((await loadError(unreached("{{- message.content | wordcount -}}"))).error.feature).toBe(
      'filter "wordcount"',
    );
    expect((await loadError(unreached("{{- message.content | center(80) -}}"))).error.feature).toBe(
      'filter "center(…)"',
    );
    expect(
      (await loadError(unreached("{%- if message.content is float -%}x{%- endif -%}"))).error.feature,
    ).toBe('test "is float"');
    expect((await loadError(unreached("{{- '{}'.format(message.content) -}}"))).error.feature).toBe(
      'method ".format()"',
    );
    expect((await loadError(unreached("{{- cycler('a', 'b') -}}"))).error.feature).toBe(
      'function "cycler()"',
    );
  });

  it("a failure only a probe render shows: a filter on a type it does not take", async () => {
    const { error } = await loadError(
      around("{%- if message.tool_calls -%}{{- message.tool_calls | trim -}}{%- endif -%}"),
    );
    expect(error.feature).toBe('filter "trim" on an array');
    expect(error.message).toMatch(
      /cannot render a probe conversation \(system, user, an assistant tool call, its output, .*with tools\): it uses filter "trim" on an array/,
    );
  });

  it("a template given in place of the folder's is named by its path, with source template", async () => {
    const dir = modelFolderWith(MISTRAL_LIKE_TEMPLATE);
    const file = path.join(modelFolderWith("x"), "chat_template.jinja");
    writeFileSync(file, around("{%- with x = 1 -%}{%- endwith -%}"));
    const error = await loadChatTokenizer(dir, { chatTemplate: file }).catch((e: unknown) => e);
    expect(error).toMatchObject({ feature: "tag {% with %}", file, source: "template" });
  });

  it("a template that refuses a probe with its own raise_exception still loads, and still refuses it when asked", async () => {
    const tok = await loadChatTokenizer(
      modelFolderWith(
        around(
          "{%- if message.role == 'system' -%}{{- raise_exception('System role not supported: ' + message.role) -}}{%- endif -%}",
        ),
      ),
    );
    expect(tok.render([{ role: "user", content: "hi" }])).toBe("hi<|im_end|>");
    expect(() => tok.render([{ role: "system", content: "s" }])).toThrow(ChatTemplateError);
  });

  it("the templates token mode ships with, and a Mistral-like one, use nothing the renderer lacks", async () => {
    expect(unsupportedFeature(new Template(qwen3Template()))).toBeNull();
    expect(unsupportedFeature(new Template(DEEPSEEK_V3_TOOL_TEMPLATE))).toBeNull();
    expect(unsupportedFeature(new Template(MISTRAL_LIKE_TEMPLATE))).toBeNull();
    const tok = await loadChatTokenizer(modelFolderWith(MISTRAL_LIKE_TEMPLATE));
    expect(tok.render([{ role: "user", content: "hi" }])).toBe("[INST]hi[/INST]");
  });
});

describe("templateRaises", () => {
  it("matches the messages a template's raise_exception calls can give, and no other", () => {
    const raises = templateRaises(
      new Template(
        "{{ raise_exception('Roles must alternate ' + a + '/' + b) }}{{ raise_exception(\"Exact.\") }}",
      ),
    );
    expect(raises("Roles must alternate user/assistant")).toBe(true);
    expect(raises("Exact.")).toBe(true);
    expect(raises("Exact. And more")).toBe(false);
    expect(raises("Unknown StringValue filter: wordcount")).toBe(false);
    expect(templateRaises(new Template("{{ x }}"))("anything")).toBe(false);
  });
});
