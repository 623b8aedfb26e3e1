/**
 * Whether the template renderer in use (`@huggingface/jinja`, a reimplementation of a subset of
 * Jinja) can render a chat template, decided when the template is loaded, so a feature it lacks
 * stops the proxy at start, naming the feature and the file, instead of failing the first request
 * whose messages reach it.
 *
 * What the renderer does with a feature it lacks: an unknown tag (`{% do %}`, `{% with %}`) does
 * not parse; an unknown filter, test or method parses and throws only when rendered
 * (`Unknown StringValue filter: X`, `Unknown test: X`, `Cannot call something that is not a
 * function`). So, besides parsing:
 * - every filter, test, method and global function the template names is asked of the renderer
 *   itself (a one-line template per name), so the list of what it supports is its own, not a copy
 *   that would drift when the package is updated;
 * - probe conversations are rendered (system, user, an assistant tool call, its output, an answer
 *   and a new user turn, with tools; the same without tools; a lone user message). A probe the
 *   template itself refuses with `raise_exception` is skipped: that is the template's rule, not a
 *   gap of the renderer; any other failure stops the load.
 *
 * @module
 */
import { Environment, Template } from "@huggingface/jinja";
import { TokenizerLoadError } from "./tokenizer-load-error";

/** Where a template came from, for messages: a file path, or a name for a template given as text. */
export interface TemplateOrigin {
  /** The file (or `tokenizer_config.json (chat_template)`, or a name such as `DEEPSEEK_V3_TOOL_TEMPLATE`). */
  file: string;
  /** `template`: given in place of the folder's (`--chat-template`); `folder`: the folder's own. */
  source: "folder" | "template";
}

/**
 * A chat template uses a feature the template renderer does not support. `feature` names it
 * (`tag {% do %}`, `filter "format"`, `test "is divisibleby"`, `method ".format()"`), `file` the
 * template; `source` says which option gave the template (as for every {@link TokenizerLoadError}).
 *
 * @example
 * ```ts
 * await loadChatTokenizer(dir).catch((e) => e instanceof UnsupportedTemplateFeatureError && e.feature);
 * // 'filter "wordcount"'
 * ```
 */
export class UnsupportedTemplateFeatureError extends TokenizerLoadError {
  override readonly name: string = "UnsupportedTemplateFeatureError";
  readonly feature: string;
  readonly file: string;
  constructor(feature: string, origin: TemplateOrigin, context = "uses") {
    super(
      `the chat template ${origin.file} ${context} ${feature}, which the proxy's template renderer (@huggingface/jinja) does not support`,
      origin.source,
    );
    this.feature = feature;
    this.file = origin.file;
  }
}

/**
 * Parses a chat template; a tag the renderer does not know is an
 * {@link UnsupportedTemplateFeatureError}, any other syntax error a {@link TokenizerLoadError}.
 *
 * @example
 * ```ts
 * const template = parseChatTemplate(source, { file: "chat_template.jinja", source: "folder" });
 * ```
 */
export function parseChatTemplate(source: string, origin: TemplateOrigin): Template {
  try {
    return new Template(source);
  } catch (error) {
    const message = (error as Error).message;
    const tag = /^Unknown statement type: (\w+)/.exec(message);
    if (tag) throw new UnsupportedTemplateFeatureError(`tag {% ${tag[1]} %}`, origin);
    throw new TokenizerLoadError(
      `the chat template ${origin.file} does not parse: ${message}`,
      origin.source,
    );
  }
}

type Node = { type?: unknown; [key: string]: unknown };

/** The names a template uses, by kind. */
interface UsedNames {
  filters: Map<string, "bare" | "call">;
  tests: Set<string>;
  functions: Set<string>;
  methods: Set<string>;
  /** Names the template binds itself (set, for, macro and its parameters, call blocks). */
  bound: Set<string>;
}

const isNode = (v: unknown): v is Node =>
  typeof v === "object" && v !== null && typeof (v as Node).type === "string";
const identifier = (v: unknown): string | undefined =>
  isNode(v) && v.type === "Identifier" && typeof v.value === "string" ? v.value : undefined;

/** Identifiers anywhere under `v` (the targets of set, for, macro parameters). */
function bindNames(v: unknown, into: Set<string>): void {
  const name = identifier(v);
  if (name !== undefined) into.add(name);
  else if (isNode(v) || Array.isArray(v)) for (const child of Object.values(v)) bindNames(child, into);
}

function visit(v: unknown, used: UsedNames): void {
  if (Array.isArray(v)) {
    for (const item of v) visit(item, used);
    return;
  }
  if (v instanceof Map) {
    for (const [key, value] of v) {
      visit(key, used);
      visit(value, used);
    }
    return;
  }
  if (!isNode(v)) return;
  switch (v.type) {
    case "FilterExpression":
    case "FilterStatement": {
      const filter = v.filter as Node;
      const bare = identifier(filter);
      const called = bare === undefined ? identifier(filter.callee) : undefined;
      if (bare !== undefined) used.filters.set(bare, used.filters.get(bare) ?? "bare");
      if (called !== undefined) used.filters.set(called, "call");
      // The filter's name is not a variable: visit its operand, body and arguments only.
      visit(v.operand, used);
      visit(v.body, used);
      if (bare === undefined) visit(filter.args, used);
      return;
    }
    case "TestExpression": {
      const test = identifier(v.test);
      if (test !== undefined) used.tests.add(test);
      visit(v.operand, used);
      return;
    }
    case "CallExpression": {
      const fn = identifier(v.callee);
      if (fn !== undefined) used.functions.add(fn);
      const callee = v.callee as Node;
      if (
        fn === undefined &&
        isNode(callee) &&
        callee.type === "MemberExpression" &&
        callee.computed === false
      ) {
        const method = identifier(callee.property);
        if (method !== undefined) used.methods.add(method);
        visit(callee.object, used);
      } else if (fn === undefined) visit(callee, used);
      visit(v.args, used);
      return;
    }
    case "SetStatement":
      bindNames(v.assignee, used.bound);
      break;
    case "For":
      bindNames(v.loopvar, used.bound);
      break;
    case "Macro":
      bindNames(v.name, used.bound);
      bindNames(v.args, used.bound);
      break;
    case "CallStatement":
      used.bound.add("caller");
      bindNames(v.callerArgs, used.bound);
      break;
  }
  for (const child of Object.values(v)) visit(child, used);
}

/** Values of each kind the renderer knows, to ask it about a name. */
const SAMPLES: unknown[] = ["a", ["a"], { a: "a" }, 1, 1.5, true];

/** The renderer's own error for a filter it does not have (for the operand's type). */
const UNKNOWN_FILTER = /^(Unknown (\w+ )?filter|Cannot apply filter)/;

const answers = new Map<string, boolean>();

/** Renders a one-line template and caches whether `ok` holds of the outcome. */
function ask(key: string, template: string, ok: (out: string | Error) => boolean): boolean {
  let known = answers.get(key);
  if (known === undefined) {
    const parsed = new Template(template);
    known = SAMPLES.some((v) => {
      try {
        return ok(parsed.render({ v }));
      } catch (error) {
        return ok(error as Error);
      }
    });
    answers.set(key, known);
  }
  return known;
}

const filterKnown = (name: string, form: "bare" | "call") =>
  ask(`filter ${form} ${name}`, form === "bare" ? `{{ v | ${name} }}` : `{{ v | ${name}() }}`, (out) =>
    typeof out === "string" ? true : !UNKNOWN_FILTER.test(out.message),
  );
const methodKnown = (name: string) =>
  ask(`method ${name}`, `{{ v.${name} is defined }}`, (out) => out === "true");
const globalKnown = (name: string) =>
  ask(`global ${name}`, `{{ ${name} is defined }}`, (out) => out === "true");
const TESTS = new Environment().tests;

/** Names the template is not allowed to assume are defined by the caller's data. */
const IDENTIFIER = /^[A-Za-z_]\w*$/;

/**
 * The first feature of `template` the renderer lacks, or null: its filters, tests, methods and
 * global functions, each asked of the renderer (cached per name).
 *
 * @example
 * ```ts
 * unsupportedFeature(new Template("{{ x | wordcount }}")); // 'filter "wordcount"'
 * ```
 */
export function unsupportedFeature(template: Template): string | null {
  const used: UsedNames = {
    filters: new Map(),
    tests: new Set(),
    functions: new Set(),
    methods: new Set(),
    bound: new Set(),
  };
  visit(template.parsed, used);
  for (const [name, form] of used.filters)
    if (IDENTIFIER.test(name) && !filterKnown(name, form))
      return form === "bare" ? `filter "${name}"` : `filter "${name}(…)"`;
  for (const name of used.tests) if (!TESTS.has(name)) return `test "is ${name}"`;
  for (const name of used.methods)
    if (IDENTIFIER.test(name) && !methodKnown(name)) return `method ".${name}()"`;
  for (const name of used.functions)
    if (!used.bound.has(name) && IDENTIFIER.test(name) && !globalKnown(name)) return `function "${name}()"`;
  return null;
}

/** A regular expression for the messages one `raise_exception(…)` argument can give. */
function messagePattern(node: unknown): string {
  if (isNode(node) && node.type === "StringLiteral" && typeof node.value === "string")
    return node.value.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  if (isNode(node) && node.type === "BinaryExpression" && isNode(node.operator)) {
    const op = node.operator.value;
    if (op === "+" || op === "~") return messagePattern(node.left) + messagePattern(node.right);
  }
  return "[\\s\\S]*";
}

function collectRaises(v: unknown, into: RegExp[]): void {
  if (Array.isArray(v)) for (const item of v) collectRaises(item, into);
  else if (v instanceof Map) for (const [key, value] of v) collectRaises([key, value], into);
  else if (isNode(v)) {
    if (v.type === "CallExpression" && identifier(v.callee) === "raise_exception" && Array.isArray(v.args))
      into.push(new RegExp(`^${v.args.length > 0 ? messagePattern(v.args[0]) : ""}$`));
    for (const child of Object.values(v)) collectRaises(child, into);
  }
}

/**
 * Whether an error message is one the template's own `raise_exception(…)` calls can throw (the
 * renderer throws them as plain errors, so the message is all there is to tell them by).
 *
 * @example
 * ```ts
 * templateRaises(new Template("{{ raise_exception('Roles must alternate ' + x) }}"))("Roles must alternate u/a"); // true
 * ```
 */
export function templateRaises(template: Template): (message: string) => boolean {
  const patterns: RegExp[] = [];
  collectRaises(template.parsed, patterns);
  return (message) => patterns.some((p) => p.test(message));
}

/** "an array", "a string", … for the renderer's value type names (`Array` of `ArrayValue`). */
const kindOf = (type: string) => `${/^[AEIOU]/.test(type) ? "an" : "a"} ${type.toLowerCase()}`;

/**
 * Parses `source` and checks every name it uses against the renderer: what can be known of a
 * template without rendering it. Throws {@link UnsupportedTemplateFeatureError} (or
 * {@link TokenizerLoadError} for a syntax error); returns the parsed template.
 *
 * @example
 * ```ts
 * checkChatTemplate(source, { file: "chat_template.jinja", source: "folder" });
 * ```
 */
export function checkChatTemplate(source: string, origin: TemplateOrigin): Template {
  const template = parseChatTemplate(source, origin);
  const missing = unsupportedFeature(template);
  if (missing !== null) throw new UnsupportedTemplateFeatureError(missing, origin);
  return template;
}

/** Names the feature behind one of the renderer's run-time errors, or gives the error itself. */
export function featureOfRenderError(message: string): string {
  const filter = /^Unknown (\w+)Value filter: (\w+)/.exec(message);
  if (filter) return `filter "${filter[2]}" on ${kindOf(filter[1]!)}`;
  const applied = /^Cannot apply filter "(\w+)" to type: (\w+)Value/.exec(message);
  if (applied) return `filter "${applied[1]}" on ${kindOf(applied[2]!)}`;
  const test = /^Unknown test: (\w+)/.exec(message);
  if (test) return `test "is ${test[1]}"`;
  if (message.startsWith("Cannot call something that is not a function"))
    return `a call of something the renderer does not define (${message})`;
  return `something that fails with "${message}"`;
}
