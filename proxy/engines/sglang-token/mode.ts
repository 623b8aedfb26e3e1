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
import { type ModelFamily, modelFamily, UnknownModelFamilyError } from "../../../tokenizer/families";
import { REASONING_PARSERS, toolCallParser, UnknownParserError } from "../../../tokenizer/parsers";
import { ContextLengthError, resolveContextLength } from "./context-length";
import { type DelegatedParserNames, delegatedParserNames, UnmappedParserError } from "./delegate";

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
   * defaults of the tokenizer folder, the chat template and both parsers. Default `qwen3`.
   */
  modelFamily?: string;
  /** Folder with `tokenizer.json` + `tokenizer_config.json` (or `chat_template.jinja`); default the family's. */
  tokenizerPath?: string;
  /** A chat template file used instead of the folder's and the family's (as SGLang's `--chat-template`). */
  chatTemplate?: string;
  /** Tool-call parser name (`qwen3`, `qwen25`, `hermes`, `qwen3_coder`, `deepseekv3`, …); default the family's. */
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

/**
 * A token-mode option is unusable (unknown parser, bad context length); the message names it.
 *
 * @example
 * ```ts
 * try { await TokenMode.create({ toolCallParser: "nope" }); } catch (e) { (e as TokenModeConfigError).option; } // "toolCallParser"
 * ```
 */
export class TokenModeConfigError extends Error {
  override readonly name = "TokenModeConfigError";
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`${option}: ${message}`);
  }
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
  /** The engine's names for the parsers, when parsing is delegated (checked at start). */
  readonly delegated: DelegatedParserNames | null;
  private readonly logger: Logger | undefined;
  private readonly promptTailReplicas = new Set<string>();

  private constructor(
    readonly tokenizer: ChatTokenizer,
    readonly model: string,
    private readonly options: TokenModeOptions,
    engine: { contextLength: number; logger?: Logger },
  ) {
    this.toolCallParser = options.toolCallParser!;
    this.reasoningParser = options.reasoningParser!;
    this.contextLength = engine.contextLength;
    this.delegateParsing = options.delegateParsing ?? false;
    this.delegated = this.delegateParsing
      ? delegatedParserNames(this.toolCallParser, this.reasoningParser)
      : null;
    this.logger = engine.logger;
  }

  /**
   * Checks the options and loads the tokenizer (cached per folder); with `engine`, reads the
   * context length from it. Throws {@link TokenModeConfigError} naming the option, or
   * `TokenizerLoadError` naming the file.
   */
  static async create(given: TokenModeOptions, model: string, engine?: TokenModeEngine): Promise<TokenMode> {
    let family: ModelFamily;
    try {
      family = modelFamily(given.modelFamily ?? "qwen3");
    } catch (err) {
      if (err instanceof UnknownModelFamilyError) throw new TokenModeConfigError("modelFamily", err.message);
      throw err;
    }
    const options: TokenModeOptions = {
      ...given,
      toolCallParser: given.toolCallParser ?? family.toolCallParser,
      reasoningParser: given.reasoningParser ?? family.reasoningParser,
    };
    try {
      toolCallParser(options.toolCallParser!);
    } catch (err) {
      if (err instanceof UnknownParserError) throw new TokenModeConfigError("toolCallParser", err.message);
      throw err;
    }
    const reasoning = options.reasoningParser!;
    if (!(REASONING_PARSERS as readonly string[]).includes(reasoning)) {
      throw new TokenModeConfigError(
        "reasoningParser",
        `unknown reasoning parser '${reasoning}' (known: ${REASONING_PARSERS.join(", ")})`,
      );
    }
    if (options.delegateParsing) {
      // SGLang has no parser named like some of Polar's (no `qwen3` tool-call parser): map them
      // now, so a bad name fails the start and not every tool turn.
      try {
        delegatedParserNames(options.toolCallParser!, reasoning);
      } catch (err) {
        if (err instanceof UnmappedParserError) throw new TokenModeConfigError(err.option, err.message);
        throw err;
      }
    }
    const ctx = options.contextLength;
    if (ctx !== undefined && (!Number.isInteger(ctx) || ctx < 2)) {
      throw new TokenModeConfigError("contextLength", `must be an integer >= 2, got ${ctx}`);
    }
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
    const tok = await loadChatTokenizer(
      options.tokenizerPath ?? family.tokenizerDir(),
      options.chatTemplate !== undefined
        ? { chatTemplate: options.chatTemplate }
        : family.chatTemplateSource !== undefined
          ? { chatTemplateSource: family.chatTemplateSource }
          : {},
    );
    const mode = new TokenMode(tok, model, options, {
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
