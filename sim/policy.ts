/**
 * The scripted policy of the simulated engine: a pure function from (seed, routing key, prompt text)
 * to an answer text. It is not a model. It answers integer arithmetic questions ("What is 17 * 23?")
 * with a short `<think>` block and the result, wrong on purpose with probability
 * {@link WRONG_ANSWER_PROBABILITY} (off by one or a digit slip) so a group of samples has mixed
 * rewards; it re-checks on "Are you sure?", calls a calculator-like tool when the prompt offers one,
 * uses a tool's result, counts the stars in the images it is given (PNG pixels read back by
 * `sim/image-decode.ts`, off by one with probability {@link STAR_MISCOUNT_PROBABILITY}), and
 * otherwise gives a short generic reply saying it is a simulated policy.
 *
 * Determinism: the same seed, routing key and prompt always give the same answer; different routing
 * keys draw independently (so the sessions of one GRPO group differ). Temperature 0 is greedy: the
 * answer is always the correct one and ignores the routing key.
 *
 * @module
 */
import { type AgentOutcome, type AgentStep, decideAgentStep } from "./agent-policy";
import { parseOfferedTools } from "./agent-tools";
import type { SimImage } from "./images";
import { hash32, prng, readTurns, withoutHarnessContext } from "./prompt-reading";

export { hash32, prng, readTurns } from "./prompt-reading";

/** Probability that an arithmetic answer is wrong (at temperature > 0). */
export const WRONG_ANSWER_PROBABILITY = 0.25;

/** Probability that a star count is off by one (at temperature > 0), so a group gets mixed rewards. */
export const STAR_MISCOUNT_PROBABILITY = 0.25;

/** Probability that, asked "Are you sure?" after a wrong answer, the policy corrects itself. */
export const SELF_CORRECTION_PROBABILITY = 0.5;

/** What the policy decided, with the facts tests and demos may check. */
export interface PolicyAnswer {
  /** The assistant text to emit (may start with a `<think>` block; no end-of-turn token). */
  text: string;
  kind:
    | "arithmetic"
    | "tool_call"
    | "tool_result"
    | "recheck"
    | "generic"
    | "agent_step"
    | "agent_final"
    | "image_count"
    | "image_description";
  /** For arithmetic answers: the correct result and whether the emitted one is correct. */
  expected?: string;
  correct?: boolean;
  /** For agent steps: what the session does to the bug, and which step this is. */
  agent?: { outcome: AgentOutcome; action: AgentStep["action"] };
}

/** Inputs of {@link decideAnswer}. */
export interface PolicyInput {
  seed: number;
  routingKey: string;
  /** The full prompt text (a rendered chat template, or raw text for `/generate`). */
  prompt: string;
  /** Sampling temperature; 0 means greedy (always correct). Default 1. */
  temperature?: number;
  /** Images of the request, checked and measured by the endpoint (text templates render none). */
  images?: readonly SimImage[];
}

/** An arithmetic question found in a message. */
export interface ArithmeticQuestion {
  a: bigint;
  op: "+" | "-" | "*" | "/";
  b: bigint;
  /** `"17 * 23"` as the policy writes it back. */
  expression: string;
  /** The exact result: an integer, a decimal rounded to 4 places, or `undefined` for division by 0. */
  result: string | undefined;
}

/**
 * A synthetic, deterministic logprob in (-3, 0] for the token at `position` of an answer.
 *
 * @example
 * ```ts
 * const lp = syntheticLogprob(0, "session-1", 0, 151667); // e.g. -1.234567
 * ```
 */
export function syntheticLogprob(
  seed: number,
  routingKey: string,
  position: number,
  tokenId: number,
): number {
  const u = hash32(`${seed}\u0000${routingKey}\u0000${position}\u0000${tokenId}`) / 4294967296;
  // -3u is in (-3, 0]; six decimals keep the JSON short and exactly reproducible.
  return Math.round(-3 * u * 1e6) / 1e6 || 0;
}

const QUESTION = /(?<![\w.])(-?\d{1,15})\s*([+\-*/×÷])\s*(-?\d{1,15})(?![\w.])/;

/**
 * A user message that explicitly asks for two tool calls at once. Real models emit parallel calls on
 * their own; the simulated policy does so only when told, so tests of parallel calls can ask for them
 * and every other prompt keeps its single call.
 */
export const PARALLEL_CALLS_REQUEST = /\btwo tool calls at once\b/i;

/**
 * Finds the first `a op b` integer expression in a text (`+ - * /`, also `×` and `÷`).
 *
 * @example
 * ```ts
 * parseArithmetic("What is 17 * 23?")?.result; // "391"
 * ```
 */
export function parseArithmetic(text: string): ArithmeticQuestion | undefined {
  const m = QUESTION.exec(text);
  if (!m) return undefined;
  const a = BigInt(m[1]!);
  const b = BigInt(m[3]!);
  const op =
    ({ "×": "*", "÷": "/" } as Record<string, ArithmeticQuestion["op"]>)[m[2]!] ??
    (m[2] as ArithmeticQuestion["op"]);
  let result: string | undefined;
  if (op === "+") result = (a + b).toString();
  else if (op === "-") result = (a - b).toString();
  else if (op === "*") result = (a * b).toString();
  else if (b !== 0n) result = a % b === 0n ? (a / b).toString() : formatDecimal(Number(a) / Number(b));
  return { a, op, b, expression: `${a} ${op} ${b}`, result };
}

function formatDecimal(value: number): string {
  return value.toFixed(4).replace(/0+$/, "").replace(/\.$/, "");
}

/** A plausible mistake: off by one, or one digit replaced. Never equal to `correct`. */
function wrongAnswer(correct: string, random: () => number): string {
  const negative = correct.startsWith("-");
  const [intPart = "0", frac] = correct.replace("-", "").split(".");
  if (random() < 0.5 || intPart.length === 0) {
    const delta = random() < 0.5 ? -1n : 1n;
    const shifted = BigInt(correct.split(".")[0]!) + delta;
    return frac ? `${shifted}.${frac}` : shifted.toString();
  }
  const digits = intPart.split("");
  const pos = Math.floor(random() * digits.length);
  const old = Number(digits[pos]);
  let next = (old + 1 + Math.floor(random() * 9)) % 10;
  if (pos === 0 && next === 0 && digits.length > 1) next = old === 1 ? 2 : 1;
  digits[pos] = String(next);
  return `${negative ? "-" : ""}${digits.join("")}${frac ? `.${frac}` : ""}`;
}

/** The worked reasoning for `q`, ending in `shown` (which may be a slip). */
function reasoningFor(q: ArithmeticQuestion, shown: string): string {
  const { a, b } = q;
  if (q.op === "*" && (b >= 10n || b <= -10n)) {
    const ones = b % 10n;
    const tens = b - ones;
    return `I need ${q.expression}. ${a} * ${tens} = ${a * tens} and ${a} * ${ones} = ${a * ones}, so ${a * tens} + ${a * ones} = ${shown}.`;
  }
  if (q.op === "*") return `I need ${q.expression}. Multiplying ${a} by ${b} gives ${shown}.`;
  if (q.op === "+") return `I need ${q.expression}. Adding ${b} to ${a} gives ${shown}.`;
  if (q.op === "-") return `I need ${q.expression}. Subtracting ${b} from ${a} gives ${shown}.`;
  return `I need ${q.expression}. Dividing ${a} by ${b} gives ${shown}.`;
}

function finalSentence(q: ArithmeticQuestion, shown: string, random: () => number): string {
  const forms = [
    `${q.expression} = ${shown}.`,
    `The answer is ${shown}.`,
    `${q.expression} equals ${shown}.`,
  ];
  return forms[Math.floor(random() * forms.length)]!;
}

/** Keeps a user snippet printable and free of special-token markup. */
function snippet(text: string): string {
  const clean = text
    .replace(/<\|[^|]*\|>|<\/?(think|tool_call|tool_response|tools)>/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  return clean.length > 80 ? `${clean.slice(0, 77)}...` : clean;
}

function withThinking(thinking: boolean, reasoning: string, answer: string): string {
  return thinking ? `<think>\n${reasoning}\n</think>\n\n${answer}` : answer;
}

/** A calculator-like tool offered in the Qwen3 `<tools>` block: its name and first argument. */
function findCalculatorTool(prompt: string): { name: string; argument: string } | undefined {
  const tool = parseOfferedTools(prompt).find((t) => /calc|math|arith|eval/i.test(t.name));
  return tool ? { name: tool.name, argument: Object.keys(tool.properties)[0] ?? "expression" } : undefined;
}

/**
 * Decides the answer for one prompt. Pure and deterministic.
 *
 * @example
 * ```ts
 * const a = decideAnswer({ seed: 0, routingKey: "s1", prompt: "<|im_start|>user\nWhat is 17 * 23?<|im_end|>\n<|im_start|>assistant\n" });
 * a.kind; // "arithmetic"; a.expected === "391"
 * ```
 */
export function decideAnswer(input: PolicyInput): PolicyAnswer {
  const greedy = input.temperature === 0;
  const key = greedy ? "" : input.routingKey;
  const random = prng(hash32(`${input.seed}\u0000${key}\u0000${input.prompt}`));
  const thinking = !/<think>\s*<\/think>\s*$/.test(input.prompt);
  const turns = readTurns(input.prompt);
  // What the user asked, without the context harnesses wrap around it (dates, reminders).
  const userTurns = turns
    .filter((t) => t.role === "user")
    .map((t) => ({ ...t, content: withoutHarnessContext(t.content) }));
  const lastUser = userTurns.at(-1)?.content ?? "";
  // "Reply with just the number." is honoured: the answer after the think block is the bare result.
  const terse = /\b(just|only) (the|a) (number|result|answer)\b/i.test(lastUser);

  // A coding task with tools to act through: the scripted agent takes over.
  const step = decideAgentStep({
    seed: input.seed,
    routingKey: input.routingKey,
    prompt: input.prompt,
    greedy,
    say: (reasoning, answer) => withThinking(thinking, reasoning, answer),
  });
  if (step)
    return { text: step.text, kind: step.kind, agent: { outcome: step.outcome, action: step.action } };

  if (input.images?.length) {
    const seen = imageAnswer(input.images, lastUser, thinking, terse, greedy, input.seed, key, input.prompt);
    if (seen) return seen;
  }

  // A tool result: answer the original question with it.
  if (lastUser.trimStart().startsWith("<tool_response>")) {
    const result = /<tool_response>\n?([\s\S]*?)\n?<\/tool_response>/.exec(lastUser)?.[1]?.trim() ?? "";
    const asked = [...userTurns].reverse().find((t) => parseArithmetic(t.content) !== undefined);
    const results = [...lastUser.matchAll(/<tool_response>\n?([\s\S]*?)\n?<\/tool_response>/g)].map((m) =>
      m[1]!.trim(),
    );
    if (asked && PARALLEL_CALLS_REQUEST.test(asked.content) && results.length > 1) {
      const questions = arithmeticQuestions(asked.content);
      const answer = `${questions.map((q, i) => `${q.expression} = ${results[i] ?? "?"}`).join(" and ")}.`;
      return {
        text: withThinking(thinking, `The tools returned ${results.join(" and ")}.`, answer),
        kind: "tool_result",
      };
    }
    const question = [...userTurns]
      .reverse()
      .map((t) => parseArithmetic(t.content))
      .find((q) => q !== undefined);
    if (question) {
      const answer = `${question.expression} = ${result}.`;
      return {
        text: withThinking(thinking, `The tool returned ${result}.`, answer),
        kind: "tool_result",
        expected: question.result,
        correct: result === question.result,
      };
    }
    return {
      text: withThinking(thinking, "The tool answered.", `The tool returned: ${snippet(result)}`),
      kind: "tool_result",
    };
  }

  const parallel = parallelToolCalls(lastUser, input.prompt, thinking);
  if (parallel) return parallel;

  const question = parseArithmetic(lastUser);
  if (question) {
    const tool = findCalculatorTool(input.prompt);
    if (tool) {
      // Written the way Qwen models print JSON (Python json.dumps spacing).
      const call = `{"name": ${JSON.stringify(tool.name)}, "arguments": {${JSON.stringify(tool.argument)}: ${JSON.stringify(question.expression)}}}`;
      const preface = withThinking(
        thinking,
        `I will use the ${tool.name} tool for ${question.expression}.`,
        "",
      );
      return {
        text: `${preface}<tool_call>\n${call}\n</tool_call>`,
        kind: "tool_call",
        expected: question.result,
      };
    }
    if (question.result === undefined) {
      return {
        text: withThinking(
          thinking,
          `${question.expression} divides by zero.`,
          "Division by zero is undefined.",
        ),
        kind: "arithmetic",
        correct: true,
      };
    }
    const wrong = !greedy && random() < WRONG_ANSWER_PROBABILITY;
    const shown = wrong ? wrongAnswer(question.result, random) : question.result;
    return {
      text: withThinking(
        thinking,
        reasoningFor(question, shown),
        terse ? shown : finalSentence(question, shown, random),
      ),
      kind: "arithmetic",
      expected: question.result,
      correct: !wrong,
    };
  }

  if (/\b(are you sure|double[- ]check|check again|verify)\b/i.test(lastUser)) {
    const earlier = [...userTurns.slice(0, -1)].reverse().map((t) => parseArithmetic(t.content));
    const original = earlier.find((q) => q !== undefined);
    const previous = [...turns].reverse().find((t) => t.role === "assistant")?.content ?? "";
    const previousNumber = previous.match(/-?\d+(?:\.\d+)?/g)?.at(-1);
    if (original?.result !== undefined && previousNumber !== undefined) {
      const wasRight = previousNumber === original.result;
      const fixes = wasRight || greedy || random() < SELF_CORRECTION_PROBABILITY;
      const shown = fixes ? original.result : previousNumber;
      const answer = terse
        ? shown
        : wasRight || !fixes
          ? `Yes, I am sure: ${original.expression} = ${shown}.`
          : `I made a mistake before. ${original.expression} = ${shown}.`;
      return {
        text: withThinking(thinking, reasoningFor(original, shown), answer),
        kind: "recheck",
        expected: original.result,
        correct: shown === original.result,
      };
    }
    return {
      text: withThinking(
        thinking,
        "The user asks me to confirm.",
        "Yes. I am a simulated policy and my previous answer stands.",
      ),
      kind: "recheck",
    };
  }

  const replies = [
    "I am a simulated policy (polar-sim-engine), not a language model, so I can only work out arithmetic such as 17 * 23.",
    "This reply comes from a simulated policy (polar-sim-engine). Ask me an arithmetic question like 12 + 30 and I will solve it.",
    "Simulated policy here (polar-sim-engine): I do not understand free text, but I can compute things like 144 / 12.",
  ];
  const reply = replies[Math.floor(random() * replies.length)]!;
  const said = snippet(lastUser);
  return {
    text: withThinking(thinking, `The message "${said}" has no arithmetic in it.`, reply),
    kind: "generic",
  };
}

/** Every `a op b` expression of a text, in order. */
function arithmeticQuestions(text: string): ArithmeticQuestion[] {
  const found: ArithmeticQuestion[] = [];
  for (const m of text.matchAll(new RegExp(QUESTION.source, "g"))) {
    const q = parseArithmetic(m[0]);
    if (q) found.push(q);
  }
  return found;
}

/**
 * Two `<tool_call>` blocks in one turn, one per expression, when the user asks for two tool calls
 * at once ({@link PARALLEL_CALLS_REQUEST}), a calculator tool is offered and two expressions are given.
 */
function parallelToolCalls(lastUser: string, prompt: string, thinking: boolean): PolicyAnswer | undefined {
  if (!PARALLEL_CALLS_REQUEST.test(lastUser)) return undefined;
  const tool = findCalculatorTool(prompt);
  const questions = arithmeticQuestions(lastUser).slice(0, 2);
  if (!tool || questions.length < 2) return undefined;
  // Written the way Qwen models print JSON (Python json.dumps spacing), one block per call.
  const calls = questions.map(
    (q) =>
      `<tool_call>\n{"name": ${JSON.stringify(tool.name)}, "arguments": {${JSON.stringify(tool.argument)}: ${JSON.stringify(q.expression)}}}\n</tool_call>`,
  );
  const preface = withThinking(
    thinking,
    `I will use the ${tool.name} tool for ${questions.map((q) => q.expression).join(" and ")} at once.`,
    "",
  );
  return { text: `${preface}${calls.join("\n")}`, kind: "tool_call", expected: questions[0]!.result };
}

const COUNT_QUESTION = /\b(how many|count|number of)\b/i;

/**
 * The answer about the request's images: a star count when the user asks to count (the stars of
 * every image added up; off by one with probability {@link STAR_MISCOUNT_PROBABILITY}, never
 * below 0), else a description of what arrived. Undefined when an arithmetic question should be
 * answered instead.
 */
function imageAnswer(
  images: readonly SimImage[],
  lastUser: string,
  thinking: boolean,
  terse: boolean,
  greedy: boolean,
  seed: number,
  key: string,
  prompt: string,
): PolicyAnswer | undefined {
  const what = images.map((im) => `${im.format} ${im.width}x${im.height}`).join(", ");
  const plural = images.length === 1 ? "image" : `${images.length} images`;
  if (COUNT_QUESTION.test(lastUser)) {
    if (images.some((im) => im.stars === null)) {
      return {
        text: withThinking(
          thinking,
          `I was given ${plural} (${what}); the simulator reads the pixels of non-interlaced PNGs only.`,
          "I cannot count the shapes in this image: I am a simulated policy that decodes the pixels of non-interlaced PNGs only.",
        ),
        kind: "image_description",
      };
    }
    const truth = images.reduce((n, im) => n + (im.stars ?? 0), 0);
    // Keyed by the images too, so different pictures with the same question draw independently.
    const random = prng(
      hash32(`${seed}\u0000${key}\u0000${prompt}\u0000${images.map((i) => i.digest).join(",")}`),
    );
    const wrong = !greedy && random() < STAR_MISCOUNT_PROBABILITY;
    const shown = wrong ? (truth === 0 || random() < 0.5 ? truth + 1 : truth - 1) : truth;
    const noun = shown === 1 ? "star" : "stars";
    return {
      text: withThinking(
        thinking,
        `I was given ${plural} (${what}). Counting the bright shapes, I find ${shown}.`,
        terse ? String(shown) : `There ${shown === 1 ? "is" : "are"} ${shown} ${noun} in the ${plural}.`,
      ),
      kind: "image_count",
      expected: String(truth),
      correct: !wrong,
    };
  }
  if (parseArithmetic(lastUser)) return undefined;
  return {
    text: withThinking(
      thinking,
      `The user sent ${plural} (${what}).`,
      `I received ${plural} (${what}). I am a simulated policy: ask me how many stars there are.`,
    ),
    kind: "image_description",
  };
}
