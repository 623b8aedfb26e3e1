/**
 * The scripted agent policy: for a "fix the bug" task with file and shell tools offered, it acts
 * through the tools like a small coding agent — list the files, read the source file, edit it (the
 * right fix, a wrong edit, or no edit, drawn per session), optionally run the tests, then finish
 * with a short message. It is stateless: every call re-reads the whole conversation (its own earlier
 * tool calls and the tool results) from the rendered prompt and picks the next step, so it works
 * behind any harness that renders tool results into the Qwen3 template.
 *
 * The bug it can fix is the arithmetic kind the rest of the policy knows: a function named for an
 * operation (`add`, `subtract`, `multiply`, `divide`, ...) whose `return` uses another operator,
 * or swaps the operands of `-` or `/`.
 *
 * Draws: the outcome is keyed by the routing key. A key that ends in `.N` (the control plane's
 * session ids are `batch.task.sample`) is stratified within its group: samples 0-3 of one group
 * always get two right fixes, one wrong edit and one non-edit, in a rotation chosen by the seed
 * and the group; other keys draw independently. Temperature 0 always fixes.
 *
 * @module
 */
import {
  fileCall,
  mainArgument,
  parseOfferedTools,
  type RoleTool,
  shellCall,
  type ToolCall,
  toolboxOf,
} from "./agent-tools";
import { pythonJsonDumps } from "./output-parsers";
import { hash32, prng, readTurns, withoutHarnessContext } from "./prompt-reading";

/** Most tool calls the agent makes in one conversation before it must give its final answer. */
export const MAX_AGENT_STEPS = 8;

/** What the agent does to the bug in a session. */
export type AgentOutcome = "fix" | "wrong" | "none";

/** The rotation of outcomes within a group of samples (stratified draw). */
export const GROUP_OUTCOMES: readonly AgentOutcome[] = ["fix", "wrong", "fix", "none"];

/** Probability that the agent runs the tests after its edit (when it has a shell). */
export const RUN_TESTS_PROBABILITY = 0.5;

/** The next step of the agent: a tool call or the final message. */
export interface AgentStep {
  text: string;
  kind: "agent_step" | "agent_final";
  outcome: AgentOutcome;
  action: "list" | "read" | "edit" | "test" | "final";
  call?: ToolCall;
}

/**
 * The outcome of a session's attempt.
 *
 * @example
 * ```ts
 * agentOutcome(0, "b_1.0.2", false); // "fix" | "wrong" | "none"
 * ```
 */
export function agentOutcome(seed: number, routingKey: string, greedy: boolean): AgentOutcome {
  if (greedy) return "fix";
  const sample = /^(.+)\.(\d+)$/.exec(routingKey);
  if (sample) {
    const offset = hash32(`${seed}\u0000group\u0000${sample[1]}`);
    return GROUP_OUTCOMES[(offset + Number(sample[2])) % GROUP_OUTCOMES.length]!;
  }
  const u = prng(hash32(`${seed}\u0000outcome\u0000${routingKey}`))();
  return u < 0.5 ? "fix" : u < 0.75 ? "wrong" : "none";
}

/** An arithmetic bug found in a source file. */
export interface ArithmeticBug {
  functionName: string;
  /** 0-based index of the function header and of the buggy line in the file's lines. */
  headerLine: number;
  bugLine: number;
  lines: string[];
  expected: string;
  actual: string;
  /** The buggy line, fixed. */
  fixedLine: string;
  /** The buggy line with another wrong operator. */
  wrongLine: string;
}

const OPERATION: Record<string, string> = {
  add: "+",
  plus: "+",
  sum: "+",
  subtract: "-",
  sub: "-",
  minus: "-",
  difference: "-",
  multiply: "*",
  mul: "*",
  times: "*",
  product: "*",
  divide: "/",
  div: "/",
  quotient: "/",
};

const HEADER =
  /(?:\bfunction\s+(\w+)\s*\(([^)]*)\)|\bdef\s+(\w+)\s*\(([^)]*)\)|\b(\w+)\s*[:=]\s*(?:async\s+)?(?:function\s*)?\(([^)]*)\)|^\s*(\w+)\s*\(([^)]*)\)\s*\{)/;
const RETURN = /(\breturn\s+|=>\s*)(\w+)(\s*)([+\-*/])(\s*)(\w+)/;

/**
 * Finds the first function named for an operation whose body computes another one.
 *
 * @example
 * ```ts
 * findArithmeticBug("function subtract(a, b) {\n  return a + b;\n}\n")?.fixedLine; // "  return a - b;"
 * ```
 */
export function findArithmeticBug(
  content: string,
  random: () => number = Math.random,
): ArithmeticBug | undefined {
  const lines = content.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const h = HEADER.exec(lines[i]!);
    if (!h) continue;
    const name = (h[1] ?? h[3] ?? h[5] ?? h[7])!;
    const params = (h[2] ?? h[4] ?? h[6] ?? h[8] ?? "").split(",").map((p) => p.trim().split(/[\s:=]/)[0]);
    const expected = OPERATION[name.toLowerCase()];
    if (!expected) continue;
    for (let j = i; j < Math.min(lines.length, i + 5); j++) {
      const r = RETURN.exec(lines[j]!);
      if (!r) continue;
      const [whole, lead, left, s1, op, s2, right] = r as unknown as string[];
      const swapped =
        op === expected && (op === "-" || op === "/") && left === params[1] && right === params[0];
      if (op === expected && !swapped) break;
      const line = lines[j]!;
      const at = line.indexOf(whole!);
      const rewrite = (o: string, a: string, b: string) =>
        `${line.slice(0, at)}${lead}${a}${s1}${o}${s2}${b}${line.slice(at + whole!.length)}`;
      const fixedLine = swapped ? rewrite(op!, right!, left!) : rewrite(expected, left!, right!);
      const others = ["+", "-", "*", "/"].filter((o) => o !== expected && o !== op);
      const wrongLine = rewrite(others[Math.floor(random() * others.length)]!, left!, right!);
      return {
        functionName: name,
        headerLine: i,
        bugLine: j,
        lines,
        expected,
        actual: swapped ? `${left} ${op} ${right}` : op!,
        fixedLine,
        wrongLine,
      };
    }
  }
  return undefined;
}

/** One earlier step of the conversation: the call and the tool's answer. */
interface Step {
  call: ToolCall;
  result: string | undefined;
}

function stepsOf(turns: ReadonlyArray<{ role: string; content: string }>): Step[] {
  const steps: Step[] = [];
  for (let i = 0; i < turns.length; i++) {
    const t = turns[i]!;
    if (t.role !== "assistant") continue;
    const calls = [...t.content.matchAll(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g)].flatMap((m) => {
      try {
        const c = JSON.parse(m[1]!) as { name?: unknown; arguments?: unknown };
        const args = typeof c.arguments === "string" ? JSON.parse(c.arguments) : c.arguments;
        return typeof c.name === "string"
          ? [{ name: c.name, arguments: (args ?? {}) as Record<string, unknown> }]
          : [];
      } catch {
        return [];
      }
    });
    const next = turns[i + 1];
    const results =
      next && (next.role === "user" || next.role === "tool")
        ? [...next.content.matchAll(/<tool_response>\n?([\s\S]*?)\n?<\/tool_response>/g)].map((m) =>
            stripResultFraming(m[1]!),
          )
        : [];
    for (const [k, call] of calls.entries()) steps.push({ call, result: results[k] });
  }
  return steps;
}

/** The text fields of a JSON tool result, in the order harnesses use them. */
const RESULT_KEYS = ["output", "result", "content", "text", "stdout"] as const;

/**
 * A tool result a harness sent as JSON, read as the text the tool printed: `{"output": "…"}` (the
 * Gemini API's key for a function's output), Cline's `[{"query": cmd, "result": "…", "success"}]`
 * (one entry per command, joined by lines), a JSON string. Anything else is left as it came.
 *
 * @example
 * ```ts
 * unwrapJsonResult('[{"query":"ls","result":"a.js\n","success":true}]'); // "a.js\n"
 * ```
 */
export function unwrapJsonResult(text: string): string {
  const t = text.trim();
  if (!/^[[{"]/.test(t)) return text;
  let value: unknown;
  try {
    value = JSON.parse(t);
  } catch {
    return text;
  }
  const textOf = (v: unknown): string | undefined => {
    if (typeof v === "string") return v;
    if (typeof v !== "object" || v === null || Array.isArray(v)) return undefined;
    const o = v as Record<string, unknown>;
    const key = RESULT_KEYS.find((k) => typeof o[k] === "string");
    if (key === undefined) return undefined;
    return typeof o.error === "string" && o.error ? `${o.error}\n${o[key]}` : (o[key] as string);
  };
  if (Array.isArray(value)) {
    const parts = value.map(textOf);
    return parts.length > 0 && parts.every((p) => p !== undefined) ? parts.join("\n") : text;
  }
  return textOf(value) ?? text;
}

/** Labels Gemini CLI puts on the sections of a command's result, after its output. */
const SHELL_SECTION = /^(?:Error|Exit Code|Signal|Background PIDs|Process Group PGID): /;

/**
 * A tool result without the framing a harness puts around what the tool printed. Gemini CLI
 * wraps command output in `<untrusted_context>` lines, labels it `Output: ` and appends sections
 * such as `Process Group PGID: 31`; the policy reads the output itself (the `pwd` line, the
 * listing, the test lines). `Exit Code: N` and `Error: …` stay: they tell a failed command.
 *
 * @example
 * ```ts
 * stripResultFraming("<untrusted_context>\nOutput: /w\nProcess Group PGID: 7\n</untrusted_context>"); // "/w"
 * ```
 */
export function stripResultFraming(text: string): string {
  let lines = unwrapJsonResult(text).split("\n");
  if (lines[0]?.trim() === "<untrusted_context>" && lines.at(-1)?.trim() === "</untrusted_context>")
    lines = lines.slice(1, -1);
  if (lines[0]?.startsWith("Output: ") && lines.some((l) => SHELL_SECTION.test(l))) {
    lines[0] = lines[0].slice("Output: ".length);
    lines = lines.filter((l) => !/^(?:Process Group PGID|Background PIDs): /.test(l));
  }
  return lines.join("\n");
}

/** The task: the last user turn that is not a tool result, without harness reminder blocks. */
function taskOf(turns: ReadonlyArray<{ role: string; content: string }>): string {
  const user = [...turns]
    .reverse()
    .find((t) => t.role === "user" && !t.content.trimStart().startsWith("<tool_response>"));
  return withoutHarnessContext(user?.content ?? "");
}

const CODE_FILE = /(?<![\w/.-])((?:[\w.-]+\/)*[\w.-]+\.(?:js|mjs|cjs|ts|py))(?![\w])/g;
const isTestFile = (f: string) => /(^|[/_.-])(test|tests|spec)([/_.-]|$)/i.test(f);

/**
 * Lines read tools wrap file contents in: `<file>` (older OpenCode), `<path>…</path>`,
 * `<type>file</type>`, `<content>` and `(End of file - total N lines)` (OpenCode 1.x).
 */
const READ_WRAPPER = /^(?:<\/?(?:file|content)>|<path>.*<\/path>|<type>.*<\/type>|\(End of file\b.*\))$/;

/**
 * Read-tool output without line-number gutters (`     1\t` Claude Code, `1→`, `00001| `, `1: `
 * OpenCode 1.x) or wrapper lines.
 *
 * @example
 * ```ts
 * stripReadDecorations("<content>\n1: a\n2:   b\n</content>"); // "a\n  b"
 * ```
 */
export function stripReadDecorations(text: string): string {
  const lines = text.split("\n").filter((l) => !READ_WRAPPER.test(l.trim()));
  const gutter = /^\s*\d+(?:\t|→|\| ?|: ?)/;
  const numbered = lines.filter((l) => gutter.test(l)).length;
  return (
    numbered > 0 && numbered >= lines.filter((l) => l.trim() !== "").length * 0.8
      ? lines.map((l) => l.replace(gutter, ""))
      : lines
  ).join("\n");
}

/** Escapes a sed basic regular expression (GNU and busybox sed). */
const sedPattern = (s: string) => s.replace(/[\\/.*[\]^$]/g, "\\$&");
const sedReplacement = (s: string) => s.replace(/[\\/&]/g, "\\$&");
const shellQuote = (s: string) => (/^[\w./-]+$/.test(s) ? s : `'${s.replaceAll("'", "'\\''")}'`);

/** Qwen3's native tool-call text, JSON spaced as the model prints it. */
function toolCallText(call: ToolCall): string {
  return `<tool_call>\n${pythonJsonDumps(call)}\n</tool_call>`;
}

/**
 * Passed and failed tests in a test run's output: `PASSED x` / `FAILED x` / `ERROR x` lines
 * (pytest `-rA`, upstream's format) or TAP's `ok N - x` / `not ok N - x` (`node --test` without a
 * terminal). Only the agent's reading of its own run: graders never count printed lines.
 *
 * @example
 * ```ts
 * countTestResults("ok 1 - test_add\nnot ok 2 - test_subtract\n"); // { passed: 1, failed: 1 }
 * ```
 */
export function countTestResults(output: string): { passed: number; failed: number } {
  const count = (re: RegExp) => (output.match(re) ?? []).length;
  return {
    passed: count(/^\s*PASSED\b/gm) + count(/^\s*ok \d+ - (?!.*# SKIP)/gm),
    failed: count(/^\s*(FAILED|ERROR)\b/gm) + count(/^\s*not ok \d+ - /gm),
  };
}

/** True when the conversation is a bug-fixing task with tools the agent can act through. */
export function isAgentTask(prompt: string): boolean {
  const box = toolboxOf(parseOfferedTools(prompt));
  if (!box.shell && !box.read) return false;
  return /\b(fix|bug|buggy|broken|failing|fails|repair|debug)\b/i.test(taskOf(readTurns(prompt)));
}

/** Inputs of {@link decideAgentStep}. */
export interface AgentInput {
  seed: number;
  routingKey: string;
  prompt: string;
  greedy: boolean;
  /** Wraps reasoning and answer into the reply (`<think>` block unless thinking is off). */
  say(reasoning: string, answer: string): string;
}

/**
 * Decides the agent's next step for a prompt with tools, or `undefined` when the prompt is not
 * an agent task (the caller then answers as a chat policy). Pure and deterministic.
 *
 * @example
 * ```ts
 * const step = decideAgentStep({ seed: 0, routingKey: "b.0.1", prompt, greedy: false, say: (r, a) => a });
 * step?.call; // { name: "bash", arguments: { command: "pwd && ls -a" } }
 * ```
 */
export function decideAgentStep(input: AgentInput): AgentStep | undefined {
  if (!isAgentTask(input.prompt)) return undefined;
  const box = toolboxOf(parseOfferedTools(input.prompt));
  const turns = readTurns(input.prompt);
  const task = taskOf(turns);
  const steps = stepsOf(turns);
  const outcome = agentOutcome(input.seed, input.routingKey, input.greedy);
  const random = prng(hash32(`${input.seed}\u0000steps\u0000${input.routingKey}`));
  const runTests = input.greedy || random() < RUN_TESTS_PROBABILITY;
  const call = (action: AgentStep["action"], c: ToolCall, why: string): AgentStep => ({
    text: `${input.say(why, "")}${toolCallText(c)}`,
    kind: "agent_step",
    outcome,
    action,
    call: c,
  });
  const final = (why: string, answer: string): AgentStep => ({
    text: input.say(why, answer),
    kind: "agent_final",
    outcome,
    action: "final",
  });
  if (steps.length >= MAX_AGENT_STEPS) {
    return final("I have used my step budget.", "I stop here: I ran out of steps.");
  }

  const roleOf = (c: ToolCall) =>
    (Object.entries(box) as Array<[string, RoleTool]>).find(([, r]) => r.tool.name === c.name)?.[0];
  const commandOf = (s: Step) =>
    roleOf(s.call) === "shell" ? mainArgument(box.shell!, s.call.arguments) : "";
  const listing = steps.find((s) => /^pwd && ls/.test(commandOf(s)) || roleOf(s.call) === "list");

  // Where the files are: `pwd` output first, then what the harness's system prompt says.
  const pwd = listing?.result
    ?.split("\n")
    .find((l) => l.startsWith("/"))
    ?.trim();
  const cwd =
    pwd ??
    /(?:<cwd>|working directory:?\s*|current directory:?\s*|working in the directory:?\s*)`?(\/[^\s`<]*)/i.exec(
      input.prompt,
    )?.[1];
  const abs = (f: string) => (cwd && !f.startsWith("/") ? `${cwd.replace(/\/$/, "")}/${f}` : f);

  if (!listing && (box.shell || box.list)) {
    const c = box.shell
      ? shellCall(box.shell, "pwd && ls -a", "List the files in the working directory")
      : fileCall(box.list!, cwd ?? ".", "List the files in the working directory");
    return call("list", c, "Let me look at the files in the working directory first.");
  }

  const mentioned = [...task.matchAll(CODE_FILE)].map((m) => m[1]!);
  const listed = (listing?.result ?? "")
    .split("\n")
    .map((l) => l.trim().replace(/^\[FILE\]\s*|\/$/g, ""))
    .filter((l) => /^[\w.-]+\.(?:js|mjs|cjs|ts|py)$/.test(l));
  const target = [...mentioned, ...listed].find((f) => !isTestFile(f));
  const testFile = [...mentioned, ...listed].find((f) => isTestFile(f));
  if (!target) return final("I found no source file to fix.", "I could not find the source file to fix.");

  const base = target.split("/").at(-1)!;
  const reads = steps.filter((s) => {
    const role = roleOf(s.call);
    if (role === "read") return mainArgument(box.read!, s.call.arguments).endsWith(base);
    return role === "shell" && new RegExp(`^cat '?\\S*${sedPattern(base)}'?$`).test(commandOf(s));
  });
  const readStep = reads.at(-1);
  if (!readStep?.result || !findArithmeticBug(stripReadDecorations(readStep.result), () => 0)) {
    if (reads.length === 0 && box.read)
      return call("read", fileCall(box.read, abs(target), `Read ${target}`), `I will read ${target}.`);
    if (reads.length < 2 && box.shell && !reads.some((s) => roleOf(s.call) === "shell"))
      return call(
        "read",
        shellCall(box.shell, `cat ${shellQuote(target)}`, `Show ${target}`),
        `I will print ${target}.`,
      );
    if (!readStep?.result)
      return final(`I could not read ${target}.`, `I could not read ${target}, so I changed nothing.`);
  }
  const bug = findArithmeticBug(stripReadDecorations(readStep!.result!), random);
  if (!bug || outcome === "none") {
    return final(
      bug ? `${target} looks fine to me at a glance.` : `I see no arithmetic mistake in ${target}.`,
      `I read ${target} and did not find a bug, so I changed nothing.`,
    );
  }

  const newLine = outcome === "fix" ? bug.fixedLine : bug.wrongLine;
  const edits = steps.filter((s) => {
    const role = roleOf(s.call);
    return role === "edit" || role === "write" || (role === "shell" && /^sed -i /.test(commandOf(s)));
  });
  const failed = (s: Step | undefined) =>
    s?.result === undefined ||
    /\b(error|failed|not found|no match|could not|unable|did not|invalid)\b/i.test(
      s.result.split("\n")[0]!,
    ) ||
    /exit(?:ed)?(?: with)? code:? [1-9]|No such file|can't read/i.test(s.result);
  const why = `${bug.functionName} should use ${bug.expected} but computes ${bug.actual}.`;
  if (edits.length === 0 || (edits.length < 3 && failed(edits.at(-1)))) {
    const tried = new Set(edits.map((s) => roleOf(s.call)));
    const block = bug.lines.slice(bug.headerLine, bug.bugLine + 1);
    if (box.edit && !tried.has("edit")) {
      const oldText = block.join("\n");
      const newText = [...block.slice(0, -1), newLine].join("\n");
      return call("edit", fileCall(box.edit, abs(target), `Fix ${bug.functionName}`, oldText, newText), why);
    }
    if (box.shell && !tried.has("shell")) {
      const header = bug.lines[bug.headerLine]!.trim();
      const old = bug.lines[bug.bugLine]!.trim();
      const script = `/${sedPattern(header)}/,/${sedPattern(old)}/ s/${sedPattern(old)}/${sedReplacement(newLine.trim())}/`;
      return call(
        "edit",
        shellCall(box.shell, `sed -i ${shellQuote(script)} ${shellQuote(target)}`, `Fix ${bug.functionName}`),
        why,
      );
    }
    if (box.write && !tried.has("write")) {
      const content = bug.lines.map((l, i) => (i === bug.bugLine ? newLine : l)).join("\n");
      return call("edit", fileCall(box.write, abs(target), `Fix ${bug.functionName}`, content), why);
    }
    return final("None of my edits went through.", `I could not edit ${target}.`);
  }

  const testCommand =
    /`((?:node|npm|npx|pytest|python3?)\b[^`]*)`/.exec(task)?.[1] ??
    (testFile ? (testFile.endsWith(".py") ? `python3 ${testFile}` : `node ${testFile}`) : undefined);
  const tests = steps.find((s) => testCommand !== undefined && commandOf(s) === testCommand);
  if (runTests && box.shell && testCommand && !tests) {
    return call("test", shellCall(box.shell, testCommand, "Run the tests"), "Now I run the tests.");
  }
  const changed = `I changed \`${bug.functionName}\` in ${target} to \`${newLine.trim()}\`.`;
  if (!tests?.result) return final("The edit is done.", `${changed} I did not run the tests.`);
  const { passed: passedTests, failed: failedTests } = countTestResults(tests.result);
  return final(
    `The tests report ${passedTests} passed and ${failedTests} failed.`,
    failedTests === 0
      ? `${changed} All ${passedTests} tests pass.`
      : `${changed} ${failedTests} test(s) still fail; I stop here.`,
  );
}
