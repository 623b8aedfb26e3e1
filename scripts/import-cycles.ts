/**
 * Import cycles between the modules of one part (`control-plane/`, `proxy/`, …): the import graph
 * of a folder's production `.ts` files (tests and generated migrations left out), its relative
 * imports only, with the strongly connected components of more than one module reported. Type-only
 * imports count too: a cycle of types is still two modules that cannot be read one before the
 * other. Run as `npx tsx scripts/import-cycles.ts control-plane proxy`.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import ts from "typescript";

/** Production `.ts`/`.tsx` files under `dir`. */
function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "node_modules" && entry.name !== "drizzle") sourceFiles(p, out);
    } else if (/\.tsx?$/.test(entry.name) && !/\.(test|d)\.tsx?$/.test(entry.name)) {
      out.push(p);
    }
  }
  return out;
}

/** The file a relative specifier names (`./x`, `./x.js`, `./dir`), or null. */
function resolveImport(from: string, spec: string): string | null {
  if (!spec.startsWith(".")) return null;
  const base = path.resolve(path.dirname(from), spec.replace(/\.js$/, ""));
  for (const candidate of [`${base}.ts`, `${base}.tsx`, path.join(base, "index.ts"), base]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return null;
}

/** The files `file` imports or re-exports from. */
function importsOf(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  for (const st of source.statements) {
    const spec =
      (ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) &&
      st.moduleSpecifier &&
      ts.isStringLiteral(st.moduleSpecifier)
        ? st.moduleSpecifier.text
        : null;
    const target = spec ? resolveImport(file, spec) : null;
    if (target) out.push(target);
  }
  return out;
}

/**
 * The import cycles among the modules under `dir`, each as the paths (relative to `dir`) of the
 * modules in it, sorted; empty when there is none.
 *
 * @example
 * ```ts
 * importCycles("proxy"); // [] — or e.g. [["admin.ts", "server.ts"]]
 * ```
 */
export function importCycles(dir: string): string[][] {
  const root = path.resolve(dir);
  const files = sourceFiles(root);
  const inside = (f: string) => f.startsWith(root + path.sep);
  const edges = new Map(files.map((f) => [f, importsOf(f).filter(inside)]));
  // Tarjan's strongly connected components.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter);
    counter++;
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop() as string;
      onStack.delete(w);
      component.push(path.relative(root, w));
    } while (w !== v);
    if (component.length > 1) cycles.push(component.sort());
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return cycles;
}

/**
 * The arrows between parts: for each folder in `parts`, the other parts its production modules
 * import from (relative imports only), as `"from -> to"` strings, sorted. A part is the longest
 * folder of `parts` that holds the imported file, so `web/src` and `web` may both be listed.
 *
 * @example
 * ```ts
 * partArrows(["proxy", "tokenizer", "protocol"]); // ["proxy -> protocol", "proxy -> tokenizer"]
 * ```
 */
export function partArrows(parts: string[]): string[] {
  const roots = parts.map((p) => ({ name: p, root: path.resolve(p) }));
  const owner = (file: string) =>
    roots.filter((r) => file.startsWith(r.root + path.sep)).sort((a, b) => b.root.length - a.root.length)[0]
      ?.name;
  const arrows = new Set<string>();
  for (const { name, root } of roots) {
    for (const file of sourceFiles(root)) {
      for (const target of importsOf(file)) {
        const to = owner(target);
        if (to && to !== name) arrows.add(`${name} -> ${to}`);
      }
    }
  }
  return [...arrows].sort();
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename ?? "")) {
  let found = false;
  for (const dir of process.argv.slice(2)) {
    for (const cycle of importCycles(dir)) {
      found = true;
      console.log(`${dir}: ${cycle.join(" <-> ")}`);
    }
  }
  process.exitCode = found ? 1 : 0;
}
