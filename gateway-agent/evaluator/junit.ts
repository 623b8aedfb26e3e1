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

/** A report's testcases by id, or why the report was refused. */
export type JunitReport =
  | { ok: true; tests: Record<string, TestStatus>; failures: number }
  | { ok: false; reason: string };

/** Largest report read (bytes): far beyond any real suite, small enough to parse in memory. */
export const MAX_REPORT_BYTES = 16 * 1024 * 1024;

/**
 * Parses a JUnit XML report. A testcase's id is its `name` attribute; a child `<failure>` makes
 * it FAILED, `<error>` ERROR, `<skipped>` SKIPPED, none PASSED.
 *
 * @example
 * ```ts
 * parseJunit('<testsuites><testcase name="a"/><testcase name="b"><failure/></testcase></testsuites>');
 * // { ok: true, tests: { a: "PASSED", b: "FAILED" }, failures: 1 }
 * ```
 */
export function parseJunit(xml: string): JunitReport {
  const parser = new SaxesParser();
  const tests: Record<string, TestStatus> = {};
  let error: string | null = null;
  let current: { id: string; status: TestStatus } | null = null;
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
      current = { id: String(name), status: "PASSED" };
      return;
    }
    if (!current) return;
    const rank: Record<string, TestStatus> = { failure: "FAILED", error: "ERROR", skipped: "SKIPPED" };
    const status = rank[tag.name];
    // A failure outranks a skip in the same testcase (pytest reports teardown errors that way).
    if (status && (current.status === "PASSED" || current.status === "SKIPPED")) current.status = status;
  });
  parser.on("closetag", (tag) => {
    depth--;
    if (tag.name !== "testcase" || !current) return;
    if (current.id in tests) refuse(`testcase '${current.id}' appears more than once`);
    tests[current.id] = current.status;
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
  return { ok: true, tests, failures };
}
