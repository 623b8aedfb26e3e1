/**
 * Size limits of the service's own code: no production module over {@link MAX_MODULE_LINES}
 * lines and no function over {@link MAX_FUNCTION_LINES} lines in the parts a reader follows a
 * session through (`control-plane/`, `proxy/`, `gateway-agent/`, `web/src/`). A long function is
 * where concerns hide from a reader and from a test; the limit is checked by
 * `scripts/code-size.test.ts` so it stays true. Tests and generated migrations are left out.
 * Run as `npx tsx scripts/code-size.ts proxy control-plane` to list what is over.
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

/** The most lines a production module may have. */
export const MAX_MODULE_LINES = 500;
/** The most lines a function (declaration, method, arrow or expression) may span. */
export const MAX_FUNCTION_LINES = 80;

/** One place over a limit: a whole module, or one function in it (1-based line). */
export interface Oversize {
  file: string;
  kind: "module" | "function";
  name: string;
  line: number;
  lines: number;
}

/** Production `.ts`/`.tsx` files under `dir` (tests, declarations and migrations left out). */
function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!["node_modules", "drizzle", "dist"].includes(entry.name)) sourceFiles(p, out);
    } else if (/\.tsx?$/.test(entry.name) && !/\.(test|d)\.tsx?$/.test(entry.name)) {
      out.push(p);
    }
  }
  return out;
}

/** A readable name for a function node: its own, or the variable/property it is assigned to. */
function functionName(node: ts.SignatureDeclaration): string {
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) return parent.name.getText();
  if (ts.isCallExpression(parent)) return `callback of ${parent.expression.getText().slice(0, 40)}`;
  return "(anonymous)";
}

/** What one file has over the limits. */
function oversizeIn(file: string, relativeTo: string): Oversize[] {
  const source = readFileSync(file, "utf8");
  const kind = file.endsWith(".tsx") ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const tree = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, kind);
  const name = path.relative(relativeTo, file);
  const found: Oversize[] = [];
  // Counted as `wc -l` does: a file's last newline ends its last line, it does not start one.
  const moduleLines = source.split("\n").length - (source.endsWith("\n") ? 1 : 0);
  if (moduleLines > MAX_MODULE_LINES) {
    found.push({ file: name, kind: "module", name, line: 1, lines: moduleLines });
  }
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const first = tree.getLineAndCharacterOfPosition(node.getStart()).line;
      const last = tree.getLineAndCharacterOfPosition(node.end).line;
      const lines = last - first + 1;
      if (lines > MAX_FUNCTION_LINES) {
        found.push({ file: name, kind: "function", name: functionName(node), line: first + 1, lines });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(tree);
  return found;
}

/**
 * Every module and function over the limits under `dir`, paths relative to `relativeTo`.
 *
 * @example
 * ```ts
 * oversize("proxy"); // [] when every proxy module and function is within the limits
 * ```
 */
export function oversize(dir: string, relativeTo = process.cwd()): Oversize[] {
  return sourceFiles(dir).flatMap((file) => oversizeIn(file, relativeTo));
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename ?? "")) {
  const dirs = process.argv.slice(2);
  const found = (dirs.length ? dirs : ["control-plane", "proxy", "gateway-agent", "web/src"]).flatMap((d) =>
    oversize(d),
  );
  for (const o of found) console.log(`${o.kind} ${o.lines} lines  ${o.file}:${o.line}  ${o.name}`);
  process.exitCode = found.length ? 1 : 0;
}
