/**
 * State of the `sglang` token mode: the model's tokenizer and chat template (the proxy renders
 * prompts itself), one {@link TokenBridge} per session, and the verdict tally per (harness, model).
 * The per-call loop lives in `token-inference.ts`; the pure core in `tokenizer/`.
 *
 * @module
 */
import type { JsonObject, Logger } from "../../../protocol";
import {
  type BridgeFlag,
  TokenBridge,
  type Verdict,
  type VerdictRow,
  VerdictTally,
} from "../../../tokenizer/bridge";
import { type ChatTokenizer, loadChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import { type ModelFamilyName, UnknownModelFamilyError } from "../../../tokenizer/families";
import { REASONING_PARSERS, toolCallParser, UnknownParserError } from "../../../tokenizer/parsers";
import { TokenModeConfigError } from "./config-error";
import { ContextLengthError, resolveContextLength } from "./context-length";
import {
  type DelegatedParserNames,
  delegatedParserNames,
  engineParserNames,
  UnmappedParserError,
} from "./delegate";
import { checkEngineParsers, EngineParserError } from "./engine-parsers";
import { chooseFormat, type FormatChoice } from "./format-choice";

export { TokenModeConfigError } from "./config-error";

/**
 * Context window (prompt + completion tokens) assumed when none is configured: Qwen3's 40 960
 * (`max_position_embeddings` of the Qwen3 dense models, also the simulated engine's limit).
 */
export const DEFAULT_CONTEXT_LENGTH = 40_960;

/** Sessions tracked at once by the token bridge; sessions are closed by the caller, this bounds leaks. */
export const MAX_BRIDGED_SESSIONS = 100_000;

/** Token-mode settings (the `sglang` engine's part of the proxy options). */
export interface TokenModeOptions {
  /**
   * A model family Polar-TS knows (`qwen3`, `deepseek_v3`; `tokenizer/families.ts`): the
   * defaults of the tokenizer folder, the chat template and both parsers. Without it, a
   * `tokenizerPath` or `chatTemplate` is recognised by its template (`format-choice.ts`), else `qwen3`.
   */
  modelFamily?: string;
  /**
   * Folder with `tokenizer.json` + `tokenizer_config.json` (and `chat_template.jinja` if it has
   * one); default the family's. A folder in no format Polar-TS knows has its parsing delegated.
   */
  tokenizerPath?: string;
  /** A chat template file used instead of the folder's and the family's (as SGLang's `--chat-template`). */
  chatTemplate?: string;
  /**
   * Tool-call parser name (`qwen3`, `qwen25`, `hermes`, `qwen3_coder`, `deepseekv3`, …); default the
   * family's. For a template in no format Polar-TS knows, the engine's name for its parser.
   */
  toolCallParser?: string;
  /** Reasoning parser (`qwen3`, `qwen3-thinking`, `deepseek-r1`, `none`); default the family's. */
  reasoningParser?: string;
  /**
   * Model context window; `max_new_tokens` is clamped to what is left. Read from the engine at
   * start when it reports one (a different value given here is refused); else this, else
   * {@link DEFAULT_CONTEXT_LENGTH}.
   */
  contextLength?: number;
  /** When the template renders history differently from what the model saw; default `bridge`. */
  onTemplateMismatch?: "bridge" | "new_chain";
  /** Ask SGLang (`/separate_reasoning`, `/parse_function_call`) instead of parsing in TS. */
  delegateParsing?: boolean;
  /**
   * Record the experts the engine's MoE router picked for every token (MoE routing replay, R3;
   * `protocol/routed-experts.ts`): the model's MoE layer count (`num_hidden_layers` in its
   * config) and experts per token (`num_experts_per_tok`). Each call asks SGLang for the rows its
   * chain does not hold yet (`return_routed_experts`, `routed_experts_start_len`); the engine must
   * run with `--enable-return-routed-experts`.
   */
  routedExperts?: { layers: number; topK: number };
}

/**
 * The token-mode option names, spelled once: the proxy's and the gateway's options extend
 * {@link TokenModeOptions} and pass these keys on with {@link pickTokenModeOptions}.
 *
 * @example
 * ```ts
 * TOKEN_MODE_OPTION_KEYS.includes("onTemplateMismatch"); // true
 * ```
 */
export const TOKEN_MODE_OPTION_KEYS = [
  "modelFamily",
  "tokenizerPath",
  "chatTemplate",
  "toolCallParser",
  "reasoningParser",
  "contextLength",
  "onTemplateMismatch",
  "delegateParsing",
  "routedExperts",
] as const satisfies readonly (keyof TokenModeOptions)[];

/**
 * The token-mode options set among `opts` (unset ones are left out, so defaults apply).
 *
 * @example
 * ```ts
 * pickTokenModeOptions({ engine: "sglang", toolCallParser: "hermes" }); // { toolCallParser: "hermes" }
 * ```
 */
export function pickTokenModeOptions(opts: TokenModeOptions): TokenModeOptions {
  const picked: Record<string, unknown> = {};
  for (const key of TOKEN_MODE_OPTION_KEYS) if (opts[key] !== undefined) picked[key] = opts[key];
  return picked as TokenModeOptions;
}

/** The engine a token mode serves, asked at start (context length) and named in its logs. */
export interface TokenModeEngine {
  urls: readonly string[];
  logger?: Logger;
}

interface SessionBridge {
  bridge: TokenBridge;
  turns: number;
}

/** Polar's parser names: each one Polar parses with, and, when delegating, one it maps to SGLang's. */
function checkPolarNames(format: FormatChoice): void {
  try {
    toolCallParser(format.toolCallParser);
  } catch (err) {
    if (err instanceof UnknownParserError) throw new TokenModeConfigError("toolCallParser", err.message);
    throw err;
  }
  const reasoning = format.reasoningParser;
  if (!(REASONING_PARSERS as readonly string[]).includes(reasoning)) {
    throw new TokenModeConfigError(
      "reasoningParser",
      `unknown reasoning parser '${reasoning}' (known: ${REASONING_PARSERS.join(", ")})`,
    );
  }
  if (format.delegateParsing) {
    // SGLang has no parser named like some of Polar's (no `qwen3` tool-call parser): map them
    // now, so a bad name fails the start and not every tool turn.
    try {
      delegatedParserNames(format.toolCallParser, reasoning);
    } catch (err) {
      if (err instanceof UnmappedParserError) throw new TokenModeConfigError(err.option, err.message);
      throw err;
    }
  }
}

/**
 * The engine's own parser names (a format Polar-TS does not parse): the first engine replica is
 * asked to build them, so a name it lacks fails the start; one it cannot be asked (unreachable, or
 * only a router) is said in the log.
 */
async function checkEngineNames(format: FormatChoice, engine: TokenModeEngine | undefined): Promise<void> {
  const names = engineParserNames(format.toolCallParser, format.reasoningParser);
  const url = engine?.urls[0];
  let checked = false;
  if (url !== undefined) {
    try {
      checked = await checkEngineParsers(url, {
        tool: names.tool.engine,
        reasoning: names.reasoning?.engine ?? null,
      });
    } catch (err) {
      if (err instanceof EngineParserError) throw new TokenModeConfigError(err.option, err.message);
      throw err;
    }
  }
  if (!checked)
    engine?.logger?.warn(
      `token mode: the parser names ${format.toolCallParser} / ${format.reasoningParser} could not be checked with the engine (${url === undefined ? "no engine replica given" : `${url} did not answer`}); a name it lacks fails each tool turn`,
      { tool_call_parser: format.toolCallParser, reasoning_parser: format.reasoningParser },
    );
}

/** The harness name a session is tallied under: `meta.harness`, else `meta.agent` (string or `{name}`). */
function harnessOf(meta: JsonObject): string {
  if (typeof meta.harness === "string" && meta.harness) return meta.harness;
  const agent = meta.agent;
  if (typeof agent === "string" && agent) return agent;
  if (agent && typeof agent === "object" && !Array.isArray(agent)) {
    const name = (agent as JsonObject).name ?? (agent as JsonObject).harness;
    if (typeof name === "string" && name) return name;
  }
  return "unknown";
}

/**
 * The token mode of one proxy.
 *
 * @example
 * ```ts
 * const mode = await TokenMode.create({ toolCallParser: "qwen3" }, "Qwen/Qwen3-8B");
 * const { bridge, turn } = mode.bridgeFor({ sessionId: "s1", meta: { harness: "codex" } });
 * mode.verdicts("s1"); // { extended: 0, ... }
 * mode.flags("s1"); // { reasoning_dropped: 0, image_prompt_unverified: 0 }
 * mode.tally.snapshot(); // [{ harness: "codex", model: "Qwen/Qwen3-8B", counts }]
 * ```
 */
export class TokenMode {
  readonly tally = new VerdictTally();
  private readonly sessions = new Map<string, SessionBridge>();
  readonly toolCallParser: string;
  readonly reasoningParser: string;
  readonly contextLength: number;
  readonly delegateParsing: boolean;
  /** The routed-experts shape to record (MoE routing replay), null when they are not recorded. */
  readonly routedExperts: { layers: number; topK: number } | null;
  /** The engine's names for the parsers, when parsing is delegated (checked at start). */
  readonly delegated: DelegatedParserNames | null;
  /** The family whose format is read; null when the template is in no format Polar-TS knows (parsing delegated). */
  readonly family: ModelFamilyName | null;
  private readonly logger: Logger | undefined;
  private readonly promptTailReplicas = new Set<string>();

  private constructor(
    readonly tokenizer: ChatTokenizer,
    readonly model: string,
    private readonly options: TokenModeOptions,
    format: FormatChoice,
    engine: { contextLength: number; logger?: Logger },
  ) {
    this.toolCallParser = format.toolCallParser;
    this.reasoningParser = format.reasoningParser;
    this.family = format.family;
    this.contextLength = engine.contextLength;
    this.delegateParsing = format.delegateParsing;
    this.routedExperts = options.routedExperts ?? null;
    this.delegated = !this.delegateParsing
      ? null
      : format.engineNames
        ? engineParserNames(this.toolCallParser, this.reasoningParser)
        : delegatedParserNames(this.toolCallParser, this.reasoningParser);
    this.logger = engine.logger;
  }

  /**
   * Chooses the format (`format-choice.ts`), checks the options and loads the tokenizer (cached
   * per folder; its template is checked against the renderer); with `engine`, reads the context
   * length from it. Throws {@link TokenModeConfigError} naming the option, or `TokenizerLoadError`
   * (`UnsupportedTemplateFeatureError` among them) naming the file.
   */
  static async create(given: TokenModeOptions, model: string, engine?: TokenModeEngine): Promise<TokenMode> {
    const ctx = given.contextLength;
    if (ctx !== undefined && (!Number.isInteger(ctx) || ctx < 2)) {
      throw new TokenModeConfigError("contextLength", `must be an integer >= 2, got ${ctx}`);
    }
    const routes = given.routedExperts;
    if (routes !== undefined) {
      for (const [key, value] of Object.entries(routes))
        if (!Number.isInteger(value) || value < 1)
          throw new TokenModeConfigError("routedExperts", `${key} must be an integer >= 1, got ${value}`);
    }
    let format: FormatChoice;
    try {
      format = await chooseFormat(given, engine);
    } catch (err) {
      if (err instanceof UnknownModelFamilyError) throw new TokenModeConfigError("modelFamily", err.message);
      throw err;
    }
    // How the format was chosen, said before the checks that may stop the start.
    if (format.note) engine?.logger?.[format.note.level](format.note.message, format.note.fields);
    if (format.engineNames) await checkEngineNames(format, engine);
    else checkPolarNames(format);
    let contextLength = ctx ?? DEFAULT_CONTEXT_LENGTH;
    if (engine) {
      try {
        contextLength = await resolveContextLength({
          ...(ctx !== undefined ? { configured: ctx } : {}),
          fallback: DEFAULT_CONTEXT_LENGTH,
          urls: engine.urls,
          ...(engine.logger ? { logger: engine.logger } : {}),
        });
      } catch (err) {
        if (err instanceof ContextLengthError) throw new TokenModeConfigError("contextLength", err.message);
        throw err;
      }
    }
    // The family's template replaces the folder's unless a template file is given: a family gets
    // one where its own template lacks what serving needs (DeepSeek V3's tool definitions).
    const tok = await loadChatTokenizer(format.tokenizerDir, format.template);
    const mode = new TokenMode(tok, model, given, format, {
      contextLength,
      ...(engine?.logger ? { logger: engine.logger } : {}),
    });
    // Fails now (not on the first call) when the template has no recognisable end-of-turn token.
    new TokenBridge(tok, { model });
    return mode;
  }

  /** The session's bridge (created on first use) and the index of the call about to be served. */
  bridgeFor(session: { sessionId: string; meta: JsonObject }): { bridge: TokenBridge; turn: number } {
    let entry = this.sessions.get(session.sessionId);
    if (!entry) {
      if (this.sessions.size >= MAX_BRIDGED_SESSIONS) {
        // Oldest first: Map iteration order is insertion order.
        const oldest = this.sessions.keys().next().value;
        if (oldest !== undefined) this.sessions.delete(oldest);
      }
      entry = {
        bridge: new TokenBridge(this.tokenizer, {
          harness: harnessOf(session.meta),
          model: this.model,
          tally: this.tally,
          ...(this.options.onTemplateMismatch ? { onTemplateMismatch: this.options.onTemplateMismatch } : {}),
        }),
        turns: 0,
      };
      this.sessions.set(session.sessionId, entry);
    }
    return { bridge: entry.bridge, turn: entry.turns++ };
  }

  /**
   * Notes a reply whose `output_ids` carried `promptTail` prompt tokens in front of the sampled
   * ids (builds that returned the detokenizer's `decode_ids`, sglang #10896/#17240): the call is
   * served from the logprob ids, and the replica's build is named once in the log, not per call.
   */
  noteOutputIdsPromptTail(replica: string, promptTail: number): void {
    if (promptTail === 0 || this.promptTailReplicas.has(replica)) return;
    this.promptTailReplicas.add(replica);
    this.logger?.warn(
      "the engine's /generate output_ids begin with prompt tokens (an SGLang build that returns the detokenizer's decode_ids, sglang issues #10896 and #17240); using meta_info.output_token_logprobs ids, which are right",
      { replica, prompt_tokens_in_output_ids: promptTail },
    );
  }

  /** Verdict counts of one session, or null when it made no token-mode call (or was forgotten). */
  verdicts(sessionId: string): Record<Verdict, number> | null {
    return this.sessions.get(sessionId)?.bridge.verdictCounts() ?? null;
  }

  /** Flag counts of one session (`reasoning_dropped`), or null as for {@link verdicts}. */
  flags(sessionId: string): Record<BridgeFlag, number> | null {
    return this.sessions.get(sessionId)?.bridge.flagCounts() ?? null;
  }

  /** Counts per (harness, model) across every session of this proxy. */
  snapshot(): VerdictRow[] {
    return this.tally.snapshot();
  }

  /** Drops a closed session's turn tree (its records keep everything the builders need). */
  forget(sessionId: string): void {
    this.sessions.delete(sessionId);
  }
}
