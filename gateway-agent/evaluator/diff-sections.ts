/**
 * A git diff split into per-file sections, with every path a section can touch. The agent
 * controls the diff completely (it can even make `git diff` print anything, through
 * `diff.external` or a textconv driver), so the parser assumes hostile text: quoted and
 * space-containing names, renames and copies without hunks, deletions, mode changes, symlinks
 * (mode 120000, the target is the content), binary patches, and traditional `---`/`+++` diffs
 * outside any `diff --git` header. Whatever it cannot attribute to a path is reported as such,
 * so the caller can drop it rather than apply it blind.
 *
 * @module
 */

/** What a section does to its file. */
export type ChangeKind = "modify" | "add" | "delete" | "rename" | "copy" | "mode" | "unknown";

/** One file's section of a diff. */
export interface DiffSection {
  /** The section's text, exactly as in the diff (header included). */
  text: string;
  /** Path before the change (null for an added file). */
  oldPath: string | null;
  /** Path after the change (null for a deleted file). */
  newPath: string | null;
  kind: ChangeKind;
  /** The file is a symlink after the change (mode 120000). */
  symlink: boolean;
  /** The symlink's target, when the section creates or changes one and carries it as text. */
  symlinkTarget: string | null;
  /** A binary patch or "Binary files … differ". */
  binary: boolean;
  /** Old or new mode differs (chmod), or the file type changes. */
  modeChange: boolean;
  /** Every name the section mentions (header, `---`/`+++`, rename/copy lines): what to check. */
  mentioned: string[];
  /** Set when no path could be read for certain from the section. */
  unparsed?: string;
}

const SYMLINK_MODE = "120000";

/**
 * Undoes git's C-style quoting of a path (octal bytes, `\"`, `\t`, …).
 *
 * @example
 * ```ts
 * unquoteGitPath('"t\\303\\251st \\"x\\".js"'); // 'tést "x".js'
 * ```
 */
export function unquoteGitPath(quoted: string): string {
  const body = quoted.slice(1, -1);
  const bytes: number[] = [];
  const escapes: Record<string, number> = { n: 10, t: 9, r: 13, b: 8, f: 12, v: 11, a: 7, '"': 34, "\\": 92 };
  for (let i = 0; i < body.length; i++) {
    const c = body[i] as string;
    if (c !== "\\") {
      bytes.push(...Buffer.from(c, "utf8"));
      continue;
    }
    const next = body[i + 1] ?? "";
    if (/[0-7]/.test(next)) {
      bytes.push(Number.parseInt(body.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(escapes[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/** A path token from a header line: quoted, or the rest of the line. */
function pathToken(raw: string): string {
  const t = raw.replace(/\t.*$/, "").trimEnd();
  return t.startsWith('"') && t.endsWith('"') && t.length >= 2 ? unquoteGitPath(t) : t;
}

/** Strips git's `a/` / `b/` prefix; `/dev/null` is no path. */
function stripPrefix(p: string, prefix: "a/" | "b/"): string | null {
  if (p === "/dev/null") return null;
  return p.startsWith(prefix) ? p.slice(2) : p;
}

/**
 * The two names of a `diff --git` header. Unquoted names with spaces are ambiguous in general;
 * git itself reads them when both sides are equal (`a/X b/X`), and so does this.
 */
function headerPaths(rest: string): { a: string; b: string } | null {
  if (rest.startsWith('"')) {
    const end = /^"(?:[^"\\]|\\.)*"/.exec(rest);
    if (!end) return null;
    const a = unquoteGitPath(end[0]);
    const tail = rest.slice(end[0].length).trimStart();
    const b = pathToken(tail);
    if (!a.startsWith("a/") || !b.startsWith("b/")) return null;
    return { a: a.slice(2), b: b.slice(2) };
  }
  if (!rest.startsWith("a/")) return null;
  if (rest.includes(' "b/')) {
    const [a, b] = [rest.slice(0, rest.indexOf(' "b/')), rest.slice(rest.indexOf(' "b/') + 1)];
    return { a: a.slice(2), b: pathToken(b).slice(2) };
  }
  // `a/X b/X`: the length gives X.
  if ((rest.length - 5) % 2 === 0) {
    const n = (rest.length - 5) / 2;
    const x = rest.slice(2, 2 + n);
    if (rest === `a/${x} b/${x}`) return { a: x, b: x };
  }
  const parts = rest.split(" b/");
  if (parts.length === 2) return { a: (parts[0] as string).slice(2), b: parts[1] as string };
  return null;
}

/** Splits `diff` into text before the first header and the `diff --git` sections. */
function split(diff: string): { preamble: string; sections: string[] } {
  const pieces = diff.split(/^(?=diff --git )/m);
  const preamble = pieces[0]?.startsWith("diff --git ") ? "" : (pieces.shift() ?? "");
  return { preamble, sections: pieces };
}

/** Lines that make `git apply` or `patch` act, outside a git header. */
const ACTIVE_LINE =
  /^(?:--- |\+\+\+ |@@ |\*\*\* |GIT binary patch|rename (?:from|to) |copy (?:from|to) |Index: |Binary files )/m;

/** What {@link parseSection} tracks while it walks a section's lines. */
interface SectionScan {
  s: DiffSection;
  oldMode: string | null;
  newMode: string | null;
  /** The `---` name (null = `/dev/null`); undefined until one is seen. */
  minus: string | null | undefined;
  /** The `+++` name, likewise. */
  plus: string | null | undefined;
  sawHunk: boolean;
  /** Lines left in the current hunk (old side, new side), from its `@@ -a,n +b,m @@` header. */
  left: { old: number; new: number };
  /** The hunks' added lines (a symlink's target). */
  added: string[];
}

/** Counts one line of a hunk's body against what its header announced. */
function hunkBodyLine(scan: SectionScan, line: string): void {
  const c = line[0];
  if (c === " " || c === undefined) scan.left = { old: scan.left.old - 1, new: scan.left.new - 1 };
  else if (c === "-") scan.left.old--;
  else if (c === "+") {
    scan.left.new--;
    scan.added.push(line.slice(1));
  } else if (c !== "\\") scan.left = { old: 0, new: 0 };
}

/**
 * A line after the section's hunks: it may only be blank; a file header, hunk or binary patch
 * there is another file to `git apply`/`patch`, never ours to keep.
 */
function afterHunksLine(s: DiffSection, line: string): void {
  if (!ACTIVE_LINE.test(line)) return;
  s.unparsed = "a second file's changes inside one section";
  const named = /^(?:--- |\+\+\+ |rename (?:from|to) |copy (?:from|to) )(.*)$/.exec(line);
  const p = named ? pathToken(named[1] as string).replace(/^[ab]\//, "") : null;
  if (p && p !== "/dev/null") s.mentioned.push(p);
}

/** An extended header line before the hunks: modes, renames, copies, `---`/`+++`, binary. */
function extendedHeaderLine(scan: SectionScan, line: string): void {
  const s = scan.s;
  const m =
    /^(old mode|new mode|deleted file mode|new file mode|rename from|rename to|copy from|copy to|--- |\+\+\+ )\s?(.*)$/.exec(
      line,
    );
  if (line.startsWith("GIT binary patch") || /^Binary files .* differ$/.test(line)) s.binary = true;
  if (/^index [0-9a-f]+\.\.[0-9a-f]+ (\d{6})$/.test(line)) scan.newMode = scan.oldMode = line.slice(-6);
  if (!m) return;
  const [, key, value] = m as unknown as [string, string, string];
  const named =
    key === "--- "
      ? stripPrefix(pathToken(value), "a/")
      : key === "+++ "
        ? stripPrefix(pathToken(value), "b/")
        : /from|to/.test(key)
          ? pathToken(value)
          : null;
  if (named) s.mentioned.push(named);
  if ((key === "--- " && scan.minus !== undefined) || (key === "+++ " && scan.plus !== undefined))
    s.unparsed = "two file headers in one section";
  if (key === "old mode") scan.oldMode = value;
  else if (key === "new mode") scan.newMode = value;
  else if (key === "deleted file mode") {
    s.kind = "delete";
    scan.oldMode = value;
    scan.newMode = null;
  } else if (key === "new file mode") {
    s.kind = "add";
    scan.newMode = value;
    scan.oldMode = null;
  } else if (key === "rename from" || key === "copy from") {
    s.kind = key === "rename from" ? "rename" : "copy";
    s.oldPath = pathToken(value);
  } else if (key === "rename to" || key === "copy to") s.newPath = pathToken(value);
  else if (key === "--- ") scan.minus = stripPrefix(pathToken(value), "a/");
  else if (key === "+++ ") scan.plus = stripPrefix(pathToken(value), "b/");
}

/** One line of a section after its `diff --git` header. */
function scanLine(scan: SectionScan, line: string): void {
  if (scan.left.old > 0 || scan.left.new > 0) {
    hunkBodyLine(scan, line);
    return;
  }
  const hunk = /^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@/.exec(line);
  if (hunk) {
    scan.sawHunk = true;
    scan.left = { old: Number(hunk[1] ?? 1), new: Number(hunk[2] ?? 1) };
  } else if (scan.sawHunk) afterHunksLine(scan.s, line);
  else extendedHeaderLine(scan, line);
}

/** Settles the section's paths, kind and symlink from everything its lines said. */
function finishSection(scan: SectionScan, headerRead: boolean): DiffSection {
  const { s, minus, plus, oldMode, newMode } = scan;
  // `---`/`+++` are what `git apply` and `patch` really use for the file names.
  if (minus !== undefined && s.kind !== "rename" && s.kind !== "copy") s.oldPath = minus;
  if (plus !== undefined && s.kind !== "rename" && s.kind !== "copy") s.newPath = plus;
  if (s.kind === "add") s.oldPath = null;
  if (s.kind === "delete") s.newPath = null;
  if (minus === null && s.kind === "modify") s.kind = "add";
  if (plus === null && s.kind === "modify") s.kind = "delete";
  s.modeChange = oldMode !== null && newMode !== null && oldMode !== newMode;
  if (s.modeChange && s.kind === "modify") s.kind = "mode";
  s.symlink = newMode === SYMLINK_MODE;
  if (s.symlink && scan.added.length > 0) s.symlinkTarget = scan.added.join("\n");
  if (!headerRead && !s.oldPath && !s.newPath) s.unparsed = "unreadable diff --git header";
  return s;
}

/** Reads one `diff --git` section. */
function parseSection(text: string): DiffSection {
  const lines = text.split("\n");
  const header = headerPaths((lines[0] ?? "").slice("diff --git ".length));
  const scan: SectionScan = {
    s: {
      text,
      oldPath: header?.a ?? null,
      newPath: header?.b ?? null,
      kind: "modify",
      symlink: false,
      symlinkTarget: null,
      binary: false,
      modeChange: false,
      mentioned: [header?.a, header?.b].filter((p): p is string => !!p),
    },
    oldMode: null,
    newMode: null,
    minus: undefined,
    plus: undefined,
    sawHunk: false,
    left: { old: 0, new: 0 },
    added: [],
  };
  for (const line of lines.slice(1)) scanLine(scan, line);
  return finishSection(scan, header !== null);
}

/**
 * Parses a diff into sections. Text before the first `diff --git` header that would make
 * `git apply` or `patch` act (a traditional diff, a binary patch) becomes one section with
 * `unparsed` set; plain commentary is ignored.
 *
 * @example
 * ```ts
 * const [s] = parseDiff("diff --git a/x.js b/y.js\nsimilarity index 100%\nrename from x.js\nrename to y.js\n");
 * // s.kind === "rename", s.oldPath === "x.js", s.newPath === "y.js"
 * ```
 */
export function parseDiff(diff: string): DiffSection[] {
  const { preamble, sections } = split(diff);
  const out: DiffSection[] = [];
  if (ACTIVE_LINE.test(preamble)) {
    out.push({
      text: preamble,
      oldPath: null,
      newPath: null,
      kind: "unknown",
      symlink: false,
      symlinkTarget: null,
      binary: false,
      modeChange: false,
      mentioned: [],
      unparsed: "changes outside any diff --git section",
    });
  }
  for (const text of sections) out.push(parseSection(text));
  return out;
}

/**
 * Every path a section may touch: its old and new side and any other name it mentions.
 *
 * @example
 * ```ts
 * sectionPaths(parseDiff(diff)[0]!); // ["test_calculator.js", "old_tests.js"]
 * ```
 */
export function sectionPaths(s: DiffSection): string[] {
  return [...new Set([s.oldPath, s.newPath, ...s.mentioned].filter((p): p is string => !!p))];
}
