/**
 * The token bridge: per session, a tree of turns, and for each new request the prompt ids to send
 * so that a multi-turn episode is token-exact. When the request extends an earlier turn (its
 * messages, the assistant message the proxy returned, new messages), the prompt is that turn's
 * prompt ids + its sampled ids (+ the end-of-turn token if the sampler stopped before it) + the
 * tokens of only the newly rendered suffix. Sampled text is decoded only for comparison and never
 * encoded again, so BPE drift (" fish" + "ing" re-encoding as " fishing") cannot happen.
 *
 * @module
 */
import type { ChatMessage, ChatTokenizer } from "../chat-tokenizer";
import { matchEnginePrompt } from "./engine-prompt";
import { type BridgeFlag, emptyFlagCounts } from "./flags";
import { type NormalizedMessage, normalizeMessages, prefixKeys, settingsKey } from "./normalize";
import { reasoningDropped } from "./reasoning";
import { emptyVerdictCounts, type Verdict, type VerdictTally } from "./verdicts";

/**
 * Misuse of the bridge by its caller (not by the harness): committing a turn twice, logprobs not
 * aligned with the sampled ids, a template without a recognisable end-of-turn token.
 *
 * @example
 * ```ts
 * try { bridge.commit(prepared, { sampledIds: [1], logprobs: [] , ... }); } catch (e) { e instanceof BridgeError; } // true
 * ```
 */
export class BridgeError extends Error {
  override readonly name = "BridgeError";
}

/** What the engine was asked for, as the harness sent it (already in OpenAI chat shape). */
export interface BridgeRequest {
  messages: ChatMessage[];
  /** Tools as handed to the template (e.g. `sglangToolDumps(request.tools)`). */
  tools?: unknown[];
  /** `chat_template_kwargs` of the request (e.g. `{enable_thinking: false}`). */
  templateKwargs?: Record<string, unknown>;
}

/** Where a turn's tokens came from, for off-policy accounting. */
export interface TurnProvenance {
  completion_id: string | null;
  rid: string | null;
  /** The fence's policy version when the call was admitted. */
  policy_version: string | null;
  /** The replica's weight version as the proxy knew it when it dispatched the call. */
  weight_version_start: string | null;
  /** The engine's weight version at the end of the call (`meta_info.weight_version`). */
  weight_version: string | null;
  replica: string | null;
  cached_tokens: number | null;
  /**
   * A turn continued after a weight update (partial rollouts): its sampled tokens in order, as
   * stretches each sampled under one version. Absent when one version sampled the whole turn.
   */
  version_segments?: VersionSegmentSummary[];
}

/** One stretch of a continued turn's sampled tokens and the versions it was sampled under. */
export interface VersionSegmentSummary {
  len: number;
  policy_version: string | null;
  weight_version_start: string | null;
  weight_version: string | null;
}

/** One committed turn: plain JSON, the input of the `conversation` builder. */
export interface BridgedTurn {
  turn_id: string;
  /** The turn this one extends; null when it starts a chain. */
  parent_turn_id: string | null;
  verdict: Verdict;
  /** Why the verdict is not `extended` (null when it is). */
  reason: string | null;
  /** Facts that do not change the verdict (`reasoning_dropped`); empty for most turns. */
  flags: BridgeFlag[];
  /**
   * The prompt the engine ran: the sent ids, or, for an image turn whose engine returned its
   * prompt ids, those ids (every image pad expanded by SGLang's processor). A turn extending a
   * parent always records the parent's `prompt_ids` + sampled ids + its own suffix, so a chain is
   * one sequence in the engine's space (flag `image_prompt_unverified` when the suffix is not
   * proven to be what the engine ran).
   */
  prompt_ids: number[];
  /**
   * The ids sent in `input_ids` when they differ from `prompt_ids` (image turns: pads before the
   * engine's expansion); null when the engine ran exactly what was sent. Later turns are bridged
   * from these, since SGLang expands the pads of every request again.
   */
  sent_prompt_ids: number[] | null;
  /** Tokens of the sent prompt that were added after the parent's sampled ids (0 for a chain start). */
  bridged_count: number;
  sampled_ids: number[];
  sampled_logprobs: number[];
  /** OpenAI finish reason returned to the harness (`stop`, `length`, `tool_calls`, …). */
  finish_reason: string | null;
  /** The request messages as the harness sent them. */
  messages: ChatMessage[];
  tools: unknown[] | null;
  /** The assistant message returned to the harness (parsed view of the sampled ids). */
  assistant_message: ChatMessage;
  provenance: TurnProvenance;
}

/** The result of {@link TokenBridge.prepare}: send `promptIds`, then commit with the outcome. */
export interface PreparedTurn {
  readonly turnId: string;
  readonly parentTurnId: string | null;
  readonly verdict: Verdict;
  readonly reason: string | null;
  readonly flags: readonly BridgeFlag[];
  readonly promptIds: readonly number[];
  /** Number of trailing prompt ids added after the parent's sampled ids. */
  readonly bridgedCount: number;
  /** @internal */
  readonly state: PreparedState;
}

interface PreparedState {
  bridge: TokenBridge;
  request: BridgeRequest;
  canonical: ChatMessage[];
  rendered: string;
  requestKey: string;
  settings: string;
}

/** The engine's outcome for a prepared turn. */
export interface TurnOutcome {
  sampledIds: readonly number[];
  logprobs: readonly number[];
  assistantMessage: ChatMessage;
  finishReason: string | null;
  provenance?: Partial<TurnProvenance>;
  /** The prompt ids the engine reports it ran (`prompt_token_ids`), null/absent when it sent none. */
  enginePromptIds?: readonly number[] | null;
  /** Images sent with the prompt (`image_data`); with any, the engine's prompt ids must be checked. */
  imageCount?: number;
}

/** Options of {@link TokenBridge}. */
export interface TokenBridgeOptions {
  /** Harness name, for the verdict tally. */
  harness?: string;
  /** Model name, for the verdict tally (default: the tokenizer's name). */
  model?: string;
  /** Shared (harness, model) verdict counts. */
  tally?: VerdictTally;
  /**
   * The token that closes an assistant turn in the template (`<|im_end|>` for Qwen3). Default:
   * the end-of-sequence token the template writes after an assistant message.
   */
  endOfTurnToken?: string;
  /**
   * What to do when the template renders the history differently from what the model saw:
   * `bridge` (default) keeps the sampled ids and extends the chain (the model sees its own
   * `<think>` blocks, as verl does by default); `new_chain` sends the template's render instead
   * and starts a new chain (the context a chat server would build).
   */
  onTemplateMismatch?: "bridge" | "new_chain";
  /**
   * The image pad token the engine's processor expands (default `<|image_pad|>` when the
   * tokenizer has it, as Qwen2/2.5/3-VL templates write `<|vision_start|><|image_pad|><|vision_end|>`).
   */
  imagePadToken?: string;
}

interface TurnNode {
  turn: BridgedTurn;
  /** Messages used for rendering: parent's canonical + parent's assistant + new raw messages. */
  canonical: ChatMessage[];
  /** `render(canonical, generation prompt)`: what the template would have sent. */
  rendered: string;
  settings: string;
  history: NormalizedMessage[];
  historyKey: string;
  historyChars: number;
}

const sumChars = (ms: readonly NormalizedMessage[]) => ms.reduce((n, m) => n + m.chars, 0);

/** The ids a turn sent to the engine (what later turns are bridged from). */
const sentIds = (turn: BridgedTurn): number[] => turn.sent_prompt_ids ?? turn.prompt_ids;

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  if (prefix.length > ids.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  return true;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && startsWith(a, b);
}

/** Stands for the parent's reply text in {@link TokenBridge}'s check of where that reply ends. */
const REPLY_MARKER = "\u27e6polar reply marker\u27e7";

/** Index of the `n`-th (0-based) occurrence of `needle` in `text`, or -1. */
function nthIndexOf(text: string, needle: string, n: number): number {
  let at = -1;
  for (let i = 0; i <= n; i++) {
    at = text.indexOf(needle, at + 1);
    if (at === -1) return -1;
  }
  return at;
}

function countOf(text: string, needle: string): number {
  let n = 0;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) n++;
  return n;
}

/** The end-of-sequence token the template writes right after an assistant message's text. */
function detectEndOfTurn(tok: ChatTokenizer): number {
  const probe = tok.render(
    [
      { role: "user", content: "u" },
      { role: "assistant", content: "zq" },
    ],
    { addGenerationPrompt: false },
  );
  const after = probe.slice(probe.lastIndexOf("zq") + 2);
  for (const id of tok.eosTokenIds) if (after.startsWith(tok.decode([id]))) return id;
  throw new BridgeError(
    `cannot tell the end-of-turn token of ${tok.name}: the template writes ${JSON.stringify(after)} after an assistant message`,
  );
}

/**
 * One session's turn tree. Not safe for interleaved `prepare`/`commit` of the *same* prepared turn
 * twice; concurrent requests of one session (parallel sub-agents) are fine: `prepare` reads,
 * `commit` appends.
 *
 * @example
 * ```ts
 * const bridge = new TokenBridge(await loadChatTokenizer(), { harness: "codex" });
 * const turn = bridge.prepare({ messages, tools });
 * const result = parseGenerateResponse(await postGenerate(buildGenerateRequest({ inputIds: turn.promptIds, ... })));
 * bridge.commit(turn, { sampledIds: result.outputIds, logprobs: result.logprobs, assistantMessage, finishReason });
 * bridge.turns(); // BridgedTurn[] for the conversation builder
 * ```
 */
export class TokenBridge {
  private readonly nodes: TurnNode[] = [];
  private readonly byId = new Map<string, TurnNode>();
  private readonly byHistory = new Map<string, TurnNode[]>();
  private readonly byRequest = new Map<string, TurnNode[]>();
  private readonly counts = emptyVerdictCounts();
  private readonly flagTotals = emptyFlagCounts();
  private readonly eotId: number;
  private readonly eotText: string;
  private readonly padId: number | undefined;
  private nextIndex = 0;
  private readonly harness: string;
  private readonly model: string;

  constructor(
    private readonly tok: ChatTokenizer,
    private readonly options: TokenBridgeOptions = {},
  ) {
    if (options.endOfTurnToken !== undefined) {
      const id = tok.tokenId(options.endOfTurnToken);
      if (id === undefined) throw new BridgeError(`endOfTurnToken: ${options.endOfTurnToken} is not a token`);
      this.eotId = id;
    } else {
      this.eotId = detectEndOfTurn(tok);
    }
    this.eotText = tok.decode([this.eotId]);
    if (options.imagePadToken !== undefined) {
      this.padId = tok.tokenId(options.imagePadToken);
      if (this.padId === undefined)
        throw new BridgeError(`imagePadToken: ${options.imagePadToken} is not a token`);
    } else {
      this.padId = tok.tokenId("<|image_pad|>");
    }
    this.harness = options.harness ?? "unknown";
    this.model = options.model ?? tok.name;
  }

  /** The end-of-turn token id (151645 `<|im_end|>` for Qwen3). */
  get endOfTurnId(): number {
    return this.eotId;
  }

  /**
   * Decides the prompt ids for a request. Pure with respect to the tree: nothing is recorded until
   * {@link commit}. Throws `ChatTemplateError` for messages the template cannot render.
   */
  prepare(request: BridgeRequest): PreparedTurn {
    const settings = settingsKey(request.tools, request.templateKwargs);
    const norm = normalizeMessages(request.messages, request.tools);
    const keys = prefixKeys(norm);
    const turnId = `t${this.nextIndex++}`;
    const requestKey = `${keys.at(-1) ?? ""}|${settings}`;
    const base = { bridge: this, request, requestKey, settings };

    // 1. The longest earlier history (messages + returned assistant) this request extends.
    for (let j = norm.length; j >= 1; j--) {
      const candidates = this.byHistory.get(keys[j - 1]!)?.filter((n) => n.settings === settings);
      const parent = candidates?.at(-1);
      if (!parent) continue;
      const fresh = request.messages.slice(norm[j - 1]!.rawEnd + 1);
      // The request's copy of the parent's reply: the raw messages folded into its last entry.
      const echo = request.messages.slice(j >= 2 ? norm[j - 2]!.rawEnd + 1 : 0, norm[j - 1]!.rawEnd + 1);
      const flags: BridgeFlag[] = reasoningDropped(parent.turn.assistant_message, echo)
        ? ["reasoning_dropped"]
        : [];
      const chained = this.chainFrom(parent, fresh, request, turnId, { ...base, flags });
      if (chained) return chained;
      const rendered = this.render(request.messages, request);
      return {
        turnId,
        parentTurnId: null,
        verdict: "template_mismatch",
        reason: `the new render cannot be aligned with ${parent.turn.turn_id}'s reply: started a new chain`,
        flags,
        promptIds: this.tok.encode(rendered),
        bridgedCount: 0,
        state: { ...base, canonical: request.messages, rendered },
      };
    }
    // 2. The same request as an earlier turn (a retry or a second sample): same prompt, same place.
    const twin = this.byRequest.get(requestKey)?.at(-1);
    if (twin) {
      return {
        turnId,
        parentTurnId: twin.turn.parent_turn_id,
        verdict: twin.turn.verdict,
        reason: twin.turn.reason,
        flags: twin.turn.flags.filter((f) => f !== "image_prompt_unverified"),
        promptIds: sentIds(twin.turn),
        bridgedCount: twin.turn.bridged_count,
        state: { ...base, canonical: twin.canonical, rendered: twin.rendered },
      };
    }
    // 3. A chain start: render and encode the whole request.
    const { verdict, reason } = this.classifyBreak(norm, settings);
    const rendered = this.render(request.messages, request);
    return {
      turnId,
      parentTurnId: null,
      verdict,
      reason,
      flags: [],
      promptIds: this.tok.encode(rendered),
      bridgedCount: 0,
      state: { ...base, canonical: request.messages, rendered },
    };
  }

  /** Records the engine's outcome for a prepared turn and returns the committed turn. */
  commit(prepared: PreparedTurn, outcome: TurnOutcome): BridgedTurn {
    const { state } = prepared;
    if (state.bridge !== this) throw new BridgeError("prepared turn belongs to another session");
    if (this.byId.has(prepared.turnId)) throw new BridgeError(`turn ${prepared.turnId} is already committed`);
    if (outcome.logprobs.length !== outcome.sampledIds.length) {
      throw new BridgeError(
        `logprobs (${outcome.logprobs.length}) must align with sampled ids (${outcome.sampledIds.length})`,
      );
    }
    const p = outcome.provenance ?? {};
    const ran = this.promptRan(prepared, outcome);
    const flags = [...prepared.flags];
    if (!ran.exact) flags.push("image_prompt_unverified");
    const turn: BridgedTurn = {
      turn_id: prepared.turnId,
      parent_turn_id: prepared.parentTurnId,
      verdict: prepared.verdict,
      reason: prepared.reason,
      flags,
      prompt_ids: ran.ids,
      sent_prompt_ids: sameIds(ran.ids, prepared.promptIds) ? null : [...prepared.promptIds],
      bridged_count: prepared.bridgedCount,
      sampled_ids: [...outcome.sampledIds],
      sampled_logprobs: [...outcome.logprobs],
      finish_reason: outcome.finishReason,
      messages: state.request.messages,
      tools: state.request.tools && state.request.tools.length > 0 ? state.request.tools : null,
      assistant_message: outcome.assistantMessage,
      provenance: {
        completion_id: p.completion_id ?? null,
        rid: p.rid ?? null,
        policy_version: p.policy_version ?? null,
        weight_version_start: p.weight_version_start ?? null,
        weight_version: p.weight_version ?? null,
        replica: p.replica ?? null,
        cached_tokens: p.cached_tokens ?? null,
      },
    };
    const historyMessages = [...state.canonical, outcome.assistantMessage];
    const history = normalizeMessages(historyMessages, state.request.tools);
    const node: TurnNode = {
      turn,
      canonical: state.canonical,
      rendered: state.rendered,
      settings: state.settings,
      history,
      historyKey: prefixKeys(history).at(-1)!,
      historyChars: sumChars(history),
    };
    this.nodes.push(node);
    this.byId.set(turn.turn_id, node);
    push(this.byHistory, node.historyKey, node);
    push(this.byRequest, state.requestKey, node);
    this.counts[turn.verdict] += 1;
    for (const f of turn.flags) this.flagTotals[f] += 1;
    this.options.tally?.add(this.harness, this.model, turn.verdict, turn.flags);
    return turn;
  }

  /** Committed turns in commit order. */
  turns(): BridgedTurn[] {
    return this.nodes.map((n) => n.turn);
  }

  /** Verdict counts of this session. */
  verdictCounts(): Record<Verdict, number> {
    return { ...this.counts };
  }

  /** Turns of this session carrying each flag. */
  flagCounts(): Record<BridgeFlag, number> {
    return { ...this.flagTotals };
  }

  /**
   * The prompt to record for a turn, in the engine's space: a chain start records the engine's
   * ids when they are the sent ids with image pads expanded (else the sent ids); a turn extending
   * a parent records the parent's recorded ids + sampled ids + its bridged suffix, taken from the
   * engine's ids when those extend exactly that prefix (else the suffix as sent). `exact` is false
   * when images were sent and that is not proven.
   */
  private promptRan(prepared: PreparedTurn, outcome: TurnOutcome): { ids: number[]; exact: boolean } {
    const sent = prepared.promptIds;
    const parent = prepared.parentTurnId === null ? undefined : this.byId.get(prepared.parentTurnId)?.turn;
    const held = parent ? [...parent.prompt_ids, ...parent.sampled_ids] : [];
    const asSent = parent ? [...held, ...sent.slice(sent.length - prepared.bridgedCount)] : [...sent];
    const engine = outcome.enginePromptIds;
    const images = outcome.imageCount ?? 0;
    if (engine === undefined || engine === null) return { ids: asSent, exact: images === 0 };
    const match = matchEnginePrompt(sent, engine, this.padId);
    // The engine's ids count only if they are the expansion of what was sent and, for a turn that
    // extends a parent, also extend the parent's recorded ids (which an unverified parent breaks).
    if (match.kind !== "mismatch" && startsWith(engine, held)) return { ids: [...engine], exact: true };
    return { ids: asSent, exact: images === 0 && match.kind === "same" };
  }

  private render(messages: readonly ChatMessage[], request: BridgeRequest): string {
    return this.tok.render(messages, {
      tools: request.tools,
      addGenerationPrompt: true,
      templateKwargs: request.templateKwargs,
    });
  }

  /**
   * Where the parent's reply ends (the index of its end-of-turn) in `rendered`, or -1. The reply
   * rendered as sampled right after the old prompt ends where its text does. Else: the first
   * end-of-turn after the old prompt, or, when the template changed the history, the one after as
   * many as the old prompt held (templates that strip content keep one end-of-turn per message).
   * Counting is exact unless a message quotes the end-of-turn as text (a `<|im_end|>` in the reply,
   * even one its sampled text escaped, or in reasoning the template now drops): it would then land
   * inside the reply, or on a fresh message and leave that message out of the prompt. So, when a
   * message quotes it, the place is checked: what follows it must be what the fresh messages
   * render, read off a render with the reply's text replaced by a marker and its calls' arguments
   * by `{}` (the text from the end-of-turn after the marker on); when it is not, that text's place
   * is taken.
   */
  private replyEnd(
    rendered: string,
    parent: TurnNode,
    fresh: ChatMessage[],
    request: BridgeRequest,
    sampledText: string,
  ): number {
    const old = parent.rendered;
    const intact = rendered.startsWith(old);
    if (intact && rendered.startsWith(sampledText, old.length))
      return old.length + sampledText.length - this.eotText.length;
    const counted = intact
      ? rendered.indexOf(this.eotText, old.length)
      : nthIndexOf(rendered, this.eotText, countOf(old, this.eotText));
    // Intact, only the reply can hold a quote the count misses: one its sampled text escaped (a
    // call's JSON sampled with `\u003c|im_end|>`, returned and rendered written out).
    const quoted = () =>
      intact
        ? JSON.stringify(parent.turn.assistant_message).includes(this.eotText)
        : this.quotesEndOfTurn(parent, fresh);
    if (countOf(sampledText, this.eotText) === 1 && !quoted()) return counted;
    // The reply's calls go too (`{}` arguments): templates write them after its text, so an
    // end-of-turn quoted in their arguments would be taken for the reply's end.
    const returned = parent.turn.assistant_message;
    const calls = Array.isArray(returned.tool_calls)
      ? {
          tool_calls: returned.tool_calls.map((c) => ({
            ...c,
            function: { ...c.function, arguments: "{}" },
          })),
        }
      : {};
    const reply = { ...returned, content: REPLY_MARKER, ...calls };
    const marked = this.render([...parent.canonical, reply, ...fresh], request);
    const at = marked.indexOf(REPLY_MARKER);
    const end = at === -1 ? -1 : marked.indexOf(this.eotText, at + REPLY_MARKER.length);
    // A template that does not show the reply's text gives nothing to check against.
    if (end === -1) return counted;
    const tail = marked.slice(end);
    if (counted !== -1 && rendered.slice(counted) === tail) return counted;
    return rendered.endsWith(tail) ? rendered.length - tail.length : -1;
  }

  /**
   * Whether any message of the conversation holds the end-of-turn text as its own text (content,
   * reasoning or a tool call's arguments). Only then can counting end-of-turns miss the reply's
   * end, so only then is the second render that checks it paid for: a template that rewrites the
   * history (Qwen3 dropping old reasoning) otherwise renders twice on every turn.
   */
  private quotesEndOfTurn(parent: TurnNode, fresh: ChatMessage[]): boolean {
    const messages = [...parent.canonical, parent.turn.assistant_message, ...fresh];
    return messages.some((m) => JSON.stringify(m).includes(this.eotText));
  }

  /**
   * Bridges from `parent`: renders parent history + returned assistant + fresh messages and takes
   * the text after the parent's assistant turn. Returns null when the render cannot be aligned
   * with the parent's turn at all (then the request starts a new chain).
   */
  private chainFrom(
    parent: TurnNode,
    fresh: ChatMessage[],
    request: BridgeRequest,
    turnId: string,
    { flags, ...base }: Omit<PreparedState, "canonical" | "rendered"> & { flags: BridgeFlag[] },
  ): PreparedTurn | null {
    const canonical = [...parent.canonical, parent.turn.assistant_message, ...fresh];
    const rendered = this.render(canonical, request);
    const old = parent.rendered;
    const historyIntact = rendered.startsWith(old);
    const sampled = parent.turn.sampled_ids;
    const appendEot = sampled.at(-1) !== this.eotId;
    const sampledText = this.tok.decode(sampled) + (appendEot ? this.eotText : "");
    // End of the parent's assistant turn in the new render.
    const eotAt = this.replyEnd(rendered, parent, fresh, request, sampledText);
    if (eotAt === -1) return null;
    const regionEnd = eotAt + this.eotText.length;
    let verdict: Verdict = "extended";
    let reason: string | null = null;
    if (!historyIntact) {
      verdict = "template_mismatch";
      reason = `the template renders the history before ${parent.turn.turn_id}'s reply differently from the prompt the model saw`;
    } else if (rendered.slice(old.length, regionEnd) !== sampledText) {
      verdict = "template_mismatch";
      reason = `the template renders ${parent.turn.turn_id}'s reply differently from the sampled text (e.g. drops its <think> block)`;
    }
    const state = { ...base, canonical, rendered };
    if (verdict === "template_mismatch" && this.options.onTemplateMismatch === "new_chain") {
      return {
        turnId,
        parentTurnId: null,
        verdict,
        reason,
        flags,
        promptIds: this.tok.encode(rendered),
        bridgedCount: 0,
        state,
      };
    }
    // `<|im_end|>` is a special token, so the suffix after it tokenizes on its own exactly as it
    // would inside the full render: encoding it separately adds no drift.
    const bridged = [...(appendEot ? [this.eotId] : []), ...this.tok.encode(rendered.slice(regionEnd))];
    return {
      turnId,
      parentTurnId: parent.turn.turn_id,
      verdict,
      reason,
      flags,
      promptIds: [...sentIds(parent.turn), ...sampled, ...bridged],
      bridgedCount: bridged.length,
      state,
    };
  }

  /** Why a request extends no earlier turn: fresh, compacted or rewritten history. */
  private classifyBreak(norm: NormalizedMessage[], settings: string): { verdict: Verdict; reason: string } {
    if (this.nodes.length === 0) return { verdict: "new_chain", reason: "first turn of the session" };
    let best: TurnNode | undefined;
    let bestCommon = 0;
    for (const node of this.nodes) {
      let common = 0;
      while (
        common < norm.length &&
        common < node.history.length &&
        norm[common]!.key === node.history[common]!.key
      )
        common++;
      if (common >= bestCommon) {
        best = node;
        bestCommon = common;
      }
    }
    if (!best || bestCommon === 0) {
      return {
        verdict: "new_chain",
        reason: "no message in common with an earlier turn (new conversation or sub-agent)",
      };
    }
    const id = best.turn.turn_id;
    if (norm.length < best.history.length || sumChars(norm) < best.historyChars) {
      return {
        verdict: "compacted",
        reason: `history is shorter than ${id}'s (${norm.length} vs ${best.history.length} messages, ${sumChars(norm)} vs ${best.historyChars} characters)`,
      };
    }
    if (bestCommon === best.history.length && settings !== best.settings) {
      return { verdict: "history_rewritten", reason: `tools or template kwargs changed since ${id}` };
    }
    return { verdict: "history_rewritten", reason: `message ${bestCommon} differs from ${id}'s history` };
  }
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}
