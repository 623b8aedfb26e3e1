/**
 * The command blocks of the documentation, and how each is to be checked.
 *
 * Sources: every fenced block of `README.md`, `docs/*.md`, `examples/**\/README.md` and
 * `clients/**\/README.md` (the client packages' pages) whose info
 * string is `sh`, `bash`, `shell`, `console` or empty (anything else — `text`, `ts`, `yaml`, `ini`
 * — is not a command), and the comment blocks of example files (`examples/**`, e.g. a topology's
 * header) that start with a `doc-test:` comment line.
 *
 * Each block declares its method in an HTML comment right before the fence, invisible once
 * rendered:
 *
 *     <!-- doc-test: run -->
 *     <!-- doc-test: run; ci: npm install, npm test -->    (per command: first clause is the default,
 *                                                           `METHOD: SUBSTRING, …` picks others)
 *
 * In an example file the same words follow the comment marker on the line before the commands,
 * which are the following comment lines indented by two spaces or more:
 *
 *     # doc-test: run
 *     #   npx polar sim-engine --port 30000
 *
 * The methods themselves are in `doc-checks.ts` and `doc-run.ts`; this module only finds blocks,
 * reads their annotations and splits them into commands.
 *
 * @module
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

/** The methods a block or command can declare. */
export const METHODS = ["run", "cli", "ci", "apt", "account", "covered", "syntax"] as const;
export type MethodName = (typeof METHODS)[number];

/** A method with its arguments (`covered test/e2e/x.test.ts`). */
export interface Method {
  name: MethodName;
  args: string[];
}

/** A parsed `doc-test:` annotation. */
export interface Annotation {
  /** The first clause: the method of every command no later clause picks. */
  fallback: Method;
  /** `METHOD: SUBSTRING, …` clauses, first match wins. */
  overrides: Array<{ method: Method; match: string[] }>;
}

/** One command block of a document or an example file. */
export interface DocBlock {
  /** Repository-relative path. */
  file: string;
  /** 1-based line of the opening fence (of the `doc-test:` line in example files). */
  line: number;
  /** The fence's info string; `""` when untagged, `"comment"` for example-file blocks. */
  lang: string;
  /** Body lines, with their 1-based line numbers, indentation of the fence removed. */
  lines: Array<{ n: number; text: string }>;
  annotation: Annotation | null;
  /** Why the annotation could not be read (null when it could, or when there is none). */
  annotationError: string | null;
}

/** One command of a block: continuation lines joined, trailing comment dropped. */
export interface DocCommand {
  block: DocBlock;
  /** 1-based line where the command starts. */
  line: number;
  /** The command as a shell would read it (without a trailing `&`). */
  text: string;
  /** Ended in `&`: started in the background. */
  background: boolean;
  method: Method;
}

/** Fence info strings that hold shell commands. */
const SHELL_LANGS = new Set(["", "sh", "bash", "shell", "console"]);

const ANNOTATION = /^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$/;

/**
 * Reads the text after `doc-test:`; throws with a reason a doc author can act on.
 *
 * @example
 * ```ts
 * parseAnnotation("run; ci: npm test"); // { fallback: run, overrides: [{ ci, ["npm test"] }] }
 * ```
 */
export function parseAnnotation(spec: string): Annotation {
  const clauses = spec
    .split(";")
    .map((c) => c.trim())
    .filter(Boolean);
  if (clauses.length === 0) throw new Error("empty doc-test annotation");
  const method = (head: string): Method => {
    const [name, ...args] = head.trim().split(/\s+/);
    if (!(METHODS as readonly string[]).includes(name ?? ""))
      throw new Error(`unknown doc-test method '${name}' (known: ${METHODS.join(", ")})`);
    if (name === "covered" && args.length !== 1)
      throw new Error("'covered' takes one argument: the test file that runs the command");
    if (name === "syntax" && args.length === 0)
      throw new Error("'syntax' needs a reason: what the command needs that no test machine has");
    return { name: name as MethodName, args };
  };
  const [first, ...rest] = clauses;
  if (first!.includes(":"))
    throw new Error(`the first clause is the default method, without ':' (got '${first}')`);
  return {
    fallback: method(first!),
    overrides: rest.map((clause) => {
      const colon = clause.indexOf(":");
      if (colon < 0) throw new Error(`clause '${clause}' needs 'METHOD: SUBSTRING, …'`);
      const match = clause
        .slice(colon + 1)
        .split(",")
        .map((m) => m.trim())
        .filter(Boolean);
      if (match.length === 0) throw new Error(`clause '${clause}' names no command`);
      return { method: method(clause.slice(0, colon)), match };
    }),
  };
}

function annotate(spec: string | null): Pick<DocBlock, "annotation" | "annotationError"> {
  if (spec === null) return { annotation: null, annotationError: null };
  try {
    return { annotation: parseAnnotation(spec), annotationError: null };
  } catch (err) {
    return { annotation: null, annotationError: (err as Error).message };
  }
}

/**
 * The shell blocks of one markdown document.
 *
 * @example
 * ```ts
 * markdownBlocks("README.md", readFileSync("README.md", "utf8"));
 * ```
 */
export function markdownBlocks(file: string, source: string): DocBlock[] {
  const lines = source.split("\n");
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, lang] = open;
    const body: DocBlock["lines"] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = lines[j]!.trimStart();
      if (close.startsWith(fence!) && close.slice(fence!.length).trim() === "") break;
      const l = lines[j]!;
      body.push({ n: j + 1, text: l.startsWith(indent!) ? l.slice(indent!.length) : l.trimStart() });
    }
    // The annotation: the nearest non-blank line above the fence.
    let k = i - 1;
    while (k >= 0 && lines[k]!.trim() === "") k--;
    const m = k >= 0 ? ANNOTATION.exec(lines[k]!) : null;
    if (SHELL_LANGS.has(lang!.toLowerCase()))
      blocks.push({
        file,
        line: i + 1,
        lang: lang!.toLowerCase(),
        lines: body,
        ...annotate(m ? m[1]! : null),
      });
    i = j;
  }
  return blocks;
}

/**
 * Comment markers of the example files whose comments are scanned: configuration files a user
 * copies (a topology, a task). Script sources (`.mjs`, `.ts`, `.py`) document their own argv in
 * their headers and are run by their colocated tests; they are not scanned.
 */
const COMMENT: Record<string, RegExp> = {
  yaml: /^\s*#/,
  yml: /^\s*#/,
  toml: /^\s*#/,
  sh: /^\s*#/,
};

/** `# doc-test: run` → `run` (the marker's text after the comment sign). */
const COMMENT_ANNOTATION = /^\s*(?:#|\/\/|\*)\s*doc-test:\s*(.*?)\s*$/;
/** A comment line's text: what follows the marker and one space. */
const COMMENT_TEXT = /^\s*(?:#|\/\/|\*) ?(.*)$/;
/** Lines of example-file comments that look like commands (used to catch unannotated ones). */
export const COMMAND_LIKE = /^\s{2,}(?:\$ )?(?:npx|npm|node|python3?|bash|curl|scripts\/|[A-Z][A-Z0-9_]*=)/;

/**
 * The annotated comment blocks of an example file, plus (as blocks without annotation) every
 * command-like comment line outside them, so that a command added to a header cannot go unrun.
 *
 * @example
 * ```ts
 * commentBlocks("examples/calculator/topology.yaml", text);
 * ```
 */
export function commentBlocks(file: string, source: string): DocBlock[] {
  const ext = file.split(".").pop() ?? "";
  const isComment = COMMENT[ext];
  if (!isComment) return [];
  const lines = source.split("\n");
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!isComment.test(lines[i]!)) continue;
    const marker = COMMENT_ANNOTATION.exec(lines[i]!);
    const text = COMMENT_TEXT.exec(lines[i]!)?.[1] ?? "";
    if (marker) {
      const body: DocBlock["lines"] = [];
      let j = i + 1;
      for (; j < lines.length && isComment.test(lines[j]!); j++) {
        const t = COMMENT_TEXT.exec(lines[j]!)?.[1] ?? "";
        if (!/^\s{2,}\S/.test(t)) break;
        body.push({ n: j + 1, text: t.trim() });
      }
      blocks.push({ file, line: i + 1, lang: "comment", lines: body, ...annotate(marker[1]!) });
      i = j - 1;
    } else if (COMMAND_LIKE.test(text)) {
      blocks.push({
        file,
        line: i + 1,
        lang: "comment",
        lines: [{ n: i + 1, text: text.trim() }],
        annotation: null,
        annotationError: null,
      });
    }
  }
  return blocks;
}

/**
 * Splits at top-level `&&` and finds a `#` comment, outside quotes; `open` is the quote still
 * open at the end (a quoted string going on on the next line).
 */
function scan(line: string): { parts: string[]; comment: number; open: boolean } {
  const parts: string[] = [];
  let quote: string | null = null;
  let start = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = null;
      else if (c === "\\" && quote === '"') i++;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if (c === "\\") i++;
    else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]!))) {
      parts.push(line.slice(start, i));
      return { parts, comment: i, open: false };
    } else if (c === "&" && line[i + 1] === "&") {
      parts.push(line.slice(start, i));
      start = i + 2;
      i++;
    }
  }
  parts.push(line.slice(start));
  return { parts, comment: -1, open: quote !== null };
}

function methodFor(annotation: Annotation, text: string): Method {
  for (const o of annotation.overrides) if (o.match.some((m) => text.includes(m))) return o.method;
  return annotation.fallback;
}

/**
 * The commands of an annotated block: `\` continuations joined, comments dropped, `a && b` split
 * in two (run in order, the second only if the first succeeds), `$ ` prompts of `console` blocks
 * taken as commands and their other lines as output.
 *
 * @example
 * ```ts
 * commandsOf(block).map((c) => `${c.method.name}: ${c.text}`);
 * ```
 */
export function commandsOf(block: DocBlock): DocCommand[] {
  if (!block.annotation) return [];
  const out: DocCommand[] = [];
  type Pending = { line: number; text: string; open: boolean };
  let pending: Pending | null = null;
  for (const { n, text: raw } of block.lines) {
    let text = raw;
    if (!pending) {
      if (block.lang === "console") {
        if (!text.startsWith("$ ")) continue;
        text = text.slice(2);
      }
      if (text.trim() === "") continue;
    }
    // Inside a quoted string that spans lines, a line is taken whole (no comment, newline kept).
    const prev = pending as Pending | null;
    const sofar = prev ? `${prev.text}\n` : "";
    const { comment, open } = scan(sofar + text);
    let body = comment >= 0 ? (sofar + text).slice(sofar.length, comment) : text;
    const continued = open || (comment < 0 && /\\\s*$/.test(body));
    if (!open && continued) body = body.replace(/\\\s*$/, "");
    let joined = body.trim();
    if (prev) joined = prev.open ? `${prev.text}\n${body}` : `${prev.text} ${body.trim()}`;
    const line = prev === null ? n : prev.line;
    pending = { line, text: joined, open };
    if (continued) continue;
    for (const part of scan(joined).parts) {
      let t = part.trim();
      if (!t) continue;
      const background = /(^|[^&])&$/.test(t);
      if (background) t = t.slice(0, -1).trim();
      out.push({ block, line, text: t, background, method: methodFor(block.annotation, t) });
    }
    pending = null;
  }
  return out;
}

/** Every markdown file the doc test covers, repository-relative. */
export function documentFiles(root: string): string[] {
  const docs = readdirSync(join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`);
  const readmes = (folder: string) =>
    walk(join(root, folder))
      .map((f) => relative(root, f))
      .filter((f) => f.endsWith("README.md"))
      .sort();
  return ["README.md", ...docs.sort(), ...readmes("examples"), ...readmes("clients")];
}

/** Every example file whose comments may hold commands (text files under `examples/`). */
export function exampleFiles(root: string): string[] {
  return walk(join(root, "examples"))
    .map((f) => relative(root, f))
    .filter((f) => (f.split(".").pop() ?? "") in COMMENT)
    .sort();
}

function walk(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === "node_modules" || name.startsWith(".")) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else out.push(p);
  }
  return out;
}

/**
 * Every command block of the repository's documentation and example files.
 *
 * @example
 * ```ts
 * const blocks = allBlocks(REPO_ROOT);
 * ```
 */
export function allBlocks(root: string): DocBlock[] {
  return [
    ...documentFiles(root).flatMap((f) => markdownBlocks(f, readFileSync(join(root, f), "utf8"))),
    ...exampleFiles(root).flatMap((f) => commentBlocks(f, readFileSync(join(root, f), "utf8"))),
  ];
}

/**
 * What a doc author must do about a block without a usable annotation: where, why, and the line
 * to add (the methods are listed once by {@link ANNOTATION_HELP}).
 *
 * @example
 * ```ts
 * if (!block.annotation) throw new Error(`${missingAnnotationMessage(block)}\n${ANNOTATION_HELP}`);
 * ```
 */
export function missingAnnotationMessage(block: DocBlock): string {
  const markdown = block.lang !== "comment";
  const problem = block.annotationError
    ? `its doc-test annotation is wrong: ${block.annotationError}`
    : markdown
      ? `this \`\`\`${block.lang || " (untagged)"} block has no doc-test method: add <!-- doc-test: METHOD --> on the line above its fence, or tag the fence \`\`\`text if it is not a command`
      : "this command in an example file's comments has no doc-test method: add a comment line `doc-test: METHOD` above it and indent the commands by 2+ spaces";
  const shown = block.lines
    .slice(0, 3)
    .map((l) => `    | ${l.text}`)
    .join("\n");
  return `${block.file}:${block.line}: ${problem}\n${shown}`;
}

/** The methods a doc author can choose from, for failure messages. */
export const ANNOTATION_HELP = [
  "Every command in README.md, docs/*.md, examples/ and clients/*/README.md is run or checked by test/docs/commands.test.ts.",
  "Methods (<!-- doc-test: METHOD --> above a fence; `# doc-test: METHOD` in an example file's comments):",
  "  run            run each command for real against the test's local stack (placeholders: PLACEHOLDERS in test/support/doc-run.ts)",
  "  cli            a synopsis: each `npx polar …` line is parsed by the real CLI parser ([optional] parts included, a|b each)",
  "  ci             a command .ci/run executes (npm ci, npm test, npm run lint, scripts/install-harnesses.sh, …)",
  "  apt            apt-get install of packages that .ci/run installs",
  "  account        needs a Cloudflare account: wrangler subcommands checked with --help, polar deploy with --dry-run",
  "  covered FILE   exercised by FILE, a test CI runs (checked to exist and to use the script)",
  "  syntax REASON  bash -n only, for what no test machine has (REASON says what)",
  "Mix per command: <!-- doc-test: run; ci: npm install, npm test --> (the first clause is the default,",
  "`METHOD: SUBSTRING, …` picks the method of the commands containing a SUBSTRING).",
].join("\n");
