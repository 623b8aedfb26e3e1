/**
 * Two checks of the test files that no linter here makes with real types (Biome's
 * `noFloatingPromises` infers types itself and misses vitest's assertion chains):
 *
 * - **Floating promises**: a statement whose value is a promise that nothing awaits, returns,
 *   chains a rejection handler onto or marks with `void`. In a test that is a check that cannot
 *   fail — an un-awaited `expect(p).rejects.toThrow()` or `expect.poll(…)` settles after the test
 *   has passed — or a step whose failure nobody sees. The TypeScript checker decides, with each tsconfig's types.
 * - **Unfinished expects**: `expect(x)` with no matcher, or a matcher named but not called
 *   (`expect(x).toBeTruthy`) — an assertion that asserts nothing.
 *
 * `npm run lint` runs both (`npx tsx scripts/test-lint.ts` lists what they find).
 *
 * @module
 */
import path from "node:path";
import ts from "typescript";

/** One finding: where it is and the statement's text (shortened). */
export interface TestLintFinding {
  file: string;
  line: number;
  text: string;
}

/** The projects whose test files are checked, each with its own types (workerd's or Node's). */
export const TEST_PROJECTS = ["tsconfig.json", "control-plane/tsconfig.json", "web/tsconfig.json"];

const isTestFile = (file: string) => /\.test\.tsx?$/.test(file) && !file.includes("node_modules");

/** Whether `type` is a promise or a thenable (including a union that holds one). */
function isThenable(checker: ts.TypeChecker, type: ts.Type): boolean {
  if (type.isUnion()) return type.types.some((t) => isThenable(checker, t));
  const then = type.getProperty("then");
  if (!then) return false;
  const thenType = checker.getTypeOfSymbol(then);
  return thenType.getCallSignatures().length > 0;
}

/** `p.catch(f)` or `p.then(f, g)`: a rejection handler is chained on, so nothing goes unseen. */
function handlesRejection(expression: ts.Expression): boolean {
  if (!ts.isCallExpression(expression) || !ts.isPropertyAccessExpression(expression.expression)) return false;
  const method = expression.expression.name.text;
  return (
    (method === "catch" && expression.arguments.length >= 1) ||
    (method === "then" && expression.arguments.length >= 2)
  );
}

/** The expression statements of `source` whose value is a thenable nothing handles. */
function floatingIn(source: ts.SourceFile, checker: ts.TypeChecker, root: string): TestLintFinding[] {
  const found: TestLintFinding[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isExpressionStatement(node)) {
      const expression = node.expression;
      const handled =
        ts.isVoidExpression(expression) ||
        ts.isAwaitExpression(expression) ||
        (ts.isBinaryExpression(expression) && expression.operatorToken.kind === ts.SyntaxKind.EqualsToken) ||
        handlesRejection(expression);
      if (!handled && isThenable(checker, checker.getTypeAtLocation(expression))) {
        found.push(findingAt(source, node, root));
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The `expect.*` calls that start an assertion chain (not `expect.assertions(n)`, `expect.unreachable()`). */
const CHAIN_ROOTS = new Set(["soft", "poll", "element"]);

/** Whether `node` is `expect(…)` or `expect.soft(…)`/`expect.poll(…)`, the root of an assertion chain. */
function isExpectCall(node: ts.Expression): boolean {
  if (!ts.isCallExpression(node)) return false;
  const callee = node.expression;
  if (ts.isIdentifier(callee)) return callee.text === "expect";
  return (
    ts.isPropertyAccessExpression(callee) &&
    ts.isIdentifier(callee.expression) &&
    callee.expression.text === "expect" &&
    CHAIN_ROOTS.has(callee.name.text)
  );
}

/** Whether `node` is a chain of property reads rooted at an expect call: `expect(x).not.toBe`. */
function isUncalledChain(node: ts.Expression): boolean {
  let current = node;
  while (ts.isPropertyAccessExpression(current)) current = current.expression;
  return current !== node && isExpectCall(current);
}

/** The statements of `source` that are an expect call with no matcher, or a matcher not called. */
function unfinishedIn(source: ts.SourceFile, root: string): TestLintFinding[] {
  const found: TestLintFinding[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isExpressionStatement(node)) {
      let expression = node.expression;
      if (ts.isAwaitExpression(expression)) expression = expression.expression;
      if (isExpectCall(expression) || isUncalledChain(expression)) found.push(findingAt(source, node, root));
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** A finding for `node`: its file relative to `root`, its line and its text, shortened. */
function findingAt(source: ts.SourceFile, node: ts.Node, root: string): TestLintFinding {
  const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
  const text = node.getText(source).replace(/\s+/g, " ");
  return {
    file: path.relative(root, source.fileName),
    line: line + 1,
    text: text.length > 100 ? `${text.slice(0, 97)}...` : text,
  };
}

/** What {@link testLint} finds, by check. */
export interface TestLintReport {
  floatingPromises: TestLintFinding[];
  unfinishedExpects: TestLintFinding[];
}

/** The parsed tsconfig `project` (relative to `root`), or an error naming it. */
function readProject(project: string, root: string): ts.ParsedCommandLine {
  const config = ts.getParsedCommandLineOfConfigFile(
    path.resolve(root, project),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(`${project}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
      },
    },
  );
  if (!config) throw new Error(`cannot read ${project}`);
  return config;
}

/**
 * Both checks over the test files of the given tsconfig projects, paths relative to `root`.
 *
 * @example
 * ```ts
 * testLint(["tsconfig.json"]); // { floatingPromises: [], unfinishedExpects: [] } when the tests are sound
 * ```
 */
export function testLint(projects = TEST_PROJECTS, root = process.cwd()): TestLintReport {
  const report: TestLintReport = { floatingPromises: [], unfinishedExpects: [] };
  for (const project of projects) {
    const config = readProject(project, root);
    const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
    const checker = program.getTypeChecker();
    const own = new Set(config.fileNames.map((f) => path.resolve(f)));
    for (const source of program.getSourceFiles()) {
      if (!own.has(path.resolve(source.fileName)) || !isTestFile(source.fileName)) continue;
      report.floatingPromises.push(...floatingIn(source, checker, root));
      report.unfinishedExpects.push(...unfinishedIn(source, root));
    }
  }
  return report;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename ?? "")) {
  const report = testLint(process.argv.length > 2 ? process.argv.slice(2) : TEST_PROJECTS);
  for (const f of report.floatingPromises) console.log(`${f.file}:${f.line}  floating promise: ${f.text}`);
  for (const f of report.unfinishedExpects)
    console.log(`${f.file}:${f.line}  expect without a matcher call: ${f.text}`);
  process.exitCode = report.floatingPromises.length + report.unfinishedExpects.length ? 1 : 0;
}
