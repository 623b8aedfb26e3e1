/**
 * JUnit XML reports (`node --test --test-reporter=junit`, pytest `--junitxml`, most other
 * runners) read strictly: one well-formed document, no DTD (so no entities to expand), every
 * `<testcase>` once. Anything else is a report the grader refuses, never a partial result.
 *
 * @module
 */
import { SaxesParser } from "saxes";

/** Statuses a testcase can have, in upstream's vocabulary. */
export type TestStatus = "PASSED" | "FAILED" | "ERROR" | "SKIPPED";

/** One `<testcase>`: its `classname` (pytest: the dotted module path and classes) and `name`. */
export interface JunitCase {
  classname: string;
  name: string;
  status: TestStatus;
  /** A skip pytest reports for an expected failure (`<skipped type="pytest.xfail">`). */
  xfail: boolean;
}

/** A report's testcases by id, or why the report was refused. */
export type JunitReport =
  | { ok: true; tests: Record<string, TestStatus>; cases: JunitCase[]; failures: number }
  | { ok: false; reason: string };

/** What identifies a testcase: its `name` alone (`test_on_output`) or `classname::name`. */
export type JunitKey = "name" | "classname";

/**
 * The `classname::name` a pytest node id gets in pytest's JUnit report (pytest's own
 * `mangle_test_address`: the file path dotted, `.py` dropped, classes joined, parameters kept).
 *
 * @example
 * ```ts
 * junitKeyOf("tests/test_calc.py::TestAdd::test_big[1-2]"); // "tests.test_calc.TestAdd::test_big[1-2]"
 * ```
 */
export function junitKeyOf(nodeid: string): string {
  const bracket = nodeid.indexOf("[");
  const address = bracket >= 0 ? nodeid.slice(0, bracket) : nodeid;
  const params = bracket >= 0 ? nodeid.slice(bracket) : "";
  const names = address.split("::");
  names[0] = (names[0] ?? "").replace(/\//g, ".").replace(/\.py$/, "");
  const name = `${names.pop() ?? ""}${params}`;
  return `${names.join(".")}::${name}`;
}

/** Largest report read (bytes): far beyond any real suite, small enough to parse in memory. */
export const MAX_REPORT_BYTES = 16 * 1024 * 1024;

/**
 * Parses a JUnit XML report. A testcase's id is its `name` attribute (or `classname::name` with
 * `key: "classname"`), which must be unique; a child `<failure>` makes it FAILED, `<error>` ERROR,
 * `<skipped>` SKIPPED, none PASSED. `cases` lists every testcase in the report's order.
 *
 * @example
 * ```ts
 * parseJunit('<testsuites><testcase name="a"/><testcase name="b"><failure/></testcase></testsuites>');
 * // { ok: true, tests: { a: "PASSED", b: "FAILED" }, cases: [{ classname: "", name: "a", …}, …], failures: 1 }
 * ```
 */
export function parseJunit(xml: string, key: JunitKey = "name"): JunitReport {
  const parser = new SaxesParser();
  const tests: Record<string, TestStatus> = {};
  const cases: JunitCase[] = [];
  let error: string | null = null;
  let current: (JunitCase & { id: string }) | null = null;
  let depth = 0;
  let roots = 0;
  const refuse = (why: string) => {
    error ??= why;
  };
  parser.on("error", (e) => refuse(`not well-formed XML: ${e.message}`));
  parser.on("doctype", () => refuse("a DOCTYPE is not allowed in a report"));
  parser.on("opentag", (tag) => {
    if (depth === 0) {
      roots++;
      if (tag.name !== "testsuites" && tag.name !== "testsuite")
        refuse(`root element is <${tag.name}>, not <testsuites> or <testsuite>`);
    }
    depth++;
    if (tag.name === "testcase") {
      if (current) refuse("a <testcase> inside another <testcase>");
      const name = tag.attributes.name;
      if (typeof name !== "string" || name === "") refuse("a <testcase> without a name");
      const classname = typeof tag.attributes.classname === "string" ? tag.attributes.classname : "";
      const id = key === "name" ? String(name) : `${classname}::${String(name)}`;
      current = { id, classname, name: String(name), status: "PASSED", xfail: false };
      return;
    }
    if (!current) return;
    const rank: Record<string, TestStatus> = { failure: "FAILED", error: "ERROR", skipped: "SKIPPED" };
    const status = rank[tag.name];
    // A failure outranks a skip in the same testcase (pytest reports teardown errors that way).
    if (status && (current.status === "PASSED" || current.status === "SKIPPED")) current.status = status;
    if (tag.name === "skipped" && tag.attributes.type === "pytest.xfail") current.xfail = true;
  });
  parser.on("closetag", (tag) => {
    depth--;
    if (tag.name !== "testcase" || !current) return;
    if (current.id in tests) refuse(`testcase '${current.id}' appears more than once`);
    tests[current.id] = current.status;
    const { id: _, ...testcase } = current;
    cases.push({ ...testcase, xfail: testcase.xfail && testcase.status === "SKIPPED" });
    current = null;
  });
  try {
    parser.write(xml).close();
  } catch (e) {
    refuse(`not well-formed XML: ${(e as Error).message}`);
  }
  if (!error && roots !== 1) refuse("no root element");
  if (error) return { ok: false, reason: error };
  const failures = Object.values(tests).filter((s) => s === "FAILED" || s === "ERROR").length;
  return { ok: true, tests, cases, failures };
}
