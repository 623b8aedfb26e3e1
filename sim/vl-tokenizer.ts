/**
 * A vision-language test tokenizer: the bundled Qwen3 `tokenizer.json` (which already holds
 * Qwen-VL's `<|vision_start|>` 151652, `<|vision_end|>` 151653 and `<|image_pad|>` 151655) with
 * the Qwen3 chat template changed to render each image part as Qwen2/2.5/3-VL templates do:
 * `<|vision_start|><|image_pad|><|vision_end|>`. Used by tests (and `startSimEngine({tokenizerDir})`)
 * to exercise image-pad expansion end to end without a multimodal checkpoint.
 *
 * @module
 */
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { defaultTokenizerDir } from "../tokenizer/chat-tokenizer";

/**
 * The placeholder a Qwen-VL chat template writes for one image.
 *
 * @example
 * ```ts
 * tok.render(messagesWithOneImage).includes(QWEN_VL_IMAGE_PLACEHOLDER); // true with vlTokenizerDir()
 * ```
 */
export const QWEN_VL_IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>";

const CONTENT_MACRO = `{%- macro render_content(content) -%}{%- if content is string -%}{{- content -}}{%- else -%}{%- for part in content -%}{%- if part.type == 'image' -%}${QWEN_VL_IMAGE_PLACEHOLDER}{%- elif part.type == 'text' -%}{{- part.text -}}{%- endif -%}{%- endfor -%}{%- endif -%}{%- endmacro -%}\n`;

/** Replaces `from` (which must occur) in `text`. */
function patch(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`the bundled Qwen3 template changed: no ${JSON.stringify(from)}`);
  return text.split(from).join(to);
}

/**
 * The Qwen3 template with image parts rendered as Qwen-VL placeholders (user and tool messages).
 *
 * @example
 * ```ts
 * const source = qwenVlTemplate(qwen3TemplateSource); // contains "<|vision_start|><|image_pad|><|vision_end|>"
 * ```
 */
export function qwenVlTemplate(qwen3: string): string {
  let t = patch(
    qwen3,
    "not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>'))",
    "not(message.content is string and message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>'))",
  );
  t = patch(
    t,
    "'<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n'",
    "'<|im_start|>' + message.role + '\\n' + render_content(message.content) + '<|im_end|>' + '\\n'",
  );
  return CONTENT_MACRO + t;
}

let made: string | undefined;

/**
 * A folder (made once per process under the OS temp dir) with the bundled Qwen3 tokenizer files
 * and the Qwen-VL style template as `chat_template.jinja`, for `loadChatTokenizer(dir)`.
 *
 * @example
 * ```ts
 * const tok = await loadChatTokenizer(vlTokenizerDir());
 * tok.render([{ role: "user", content: [{ type: "image_url", image_url: { url } }] }]); // …<|image_pad|>…
 * ```
 */
export function vlTokenizerDir(): string {
  if (made) return made;
  const src = defaultTokenizerDir();
  const dir = path.join(mkdtempSync(path.join(tmpdir(), "polar-vl-tokenizer-")), "qwen3-vl-test");
  mkdirSync(dir);
  symlinkSync(path.join(src, "tokenizer.json"), path.join(dir, "tokenizer.json"));
  const config = JSON.parse(readFileSync(path.join(src, "tokenizer_config.json"), "utf8")) as {
    chat_template: string;
  };
  writeFileSync(path.join(dir, "chat_template.jinja"), qwenVlTemplate(config.chat_template));
  const { chat_template: _t, ...rest } = config;
  writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(rest));
  made = dir;
  return dir;
}
