/**
 * Model folders for tests of "any model folder": a real `tokenizer.json` (the bundled Qwen3 one,
 * linked, not copied) with a chat template written for the test, as a model's folder ships them
 * (`tokenizer.json`, `tokenizer_config.json`, `chat_template.jinja`). Test-only.
 *
 * @module
 */
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { defaultTokenizerDir } from "./chat-tokenizer";

/**
 * A Mistral-like chat template (written for the tests, not Mistral's own): tools in
 * `[AVAILABLE_TOOLS]`, turns in `[INST]…[/INST]`, calls as `[TOOL_CALLS][{"name", "arguments"}]`,
 * outputs in `[TOOL_RESULTS]`, each reply closed by `eos_token`. No format Polar-TS parses.
 *
 * @example
 * ```ts
 * const dir = modelFolderWith(MISTRAL_LIKE_TEMPLATE);
 * ```
 */
export const MISTRAL_LIKE_TEMPLATE = [
  "{{- bos_token -}}",
  "{%- if tools -%}{{- '[AVAILABLE_TOOLS]' + (tools | tojson) + '[/AVAILABLE_TOOLS]' -}}{%- endif -%}",
  "{%- for message in messages -%}",
  "  {%- if message.role == 'system' -%}{{- '[SYSTEM_PROMPT]' + message.content + '[/SYSTEM_PROMPT]' -}}",
  "  {%- elif message.role == 'user' -%}{{- '[INST]' + message.content + '[/INST]' -}}",
  "  {%- elif message.role == 'assistant' -%}",
  "    {{- message.content -}}",
  "    {%- if message.tool_calls -%}",
  "      {{- '[TOOL_CALLS]' -}}",
  "      {%- for call in message.tool_calls -%}",
  "        {{- '[' if loop.first else ', ' -}}",
  "        {{- {'name': call.function.name, 'arguments': call.function.arguments} | tojson -}}",
  "        {{- ']' if loop.last else '' -}}",
  "      {%- endfor -%}",
  "    {%- endif -%}",
  "    {{- eos_token -}}",
  "  {%- elif message.role == 'tool' -%}{{- '[TOOL_RESULTS]' + message.content + '[/TOOL_RESULTS]' -}}",
  "  {%- else -%}{{- raise_exception('Unknown role: ' + message.role) -}}",
  "  {%- endif -%}",
  "{%- endfor -%}",
].join("\n");

/**
 * A new folder (under the OS temp dir) with the bundled Qwen3 `tokenizer.json`, its
 * `tokenizer_config.json` without the chat template, and `template` as `chat_template.jinja`.
 *
 * @example
 * ```ts
 * const tok = await loadChatTokenizer(modelFolderWith("{{ messages[0].content }}{{ eos_token }}"));
 * ```
 */
export function modelFolderWith(template: string): string {
  const from = defaultTokenizerDir();
  const dir = mkdtempSync(path.join(tmpdir(), "polar-model-folder-"));
  symlinkSync(path.join(from, "tokenizer.json"), path.join(dir, "tokenizer.json"));
  const config = JSON.parse(readFileSync(path.join(from, "tokenizer_config.json"), "utf8")) as Record<
    string,
    unknown
  >;
  delete config.chat_template;
  writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
  writeFileSync(path.join(dir, "chat_template.jinja"), template);
  return dir;
}
