// Tests of calculator.js. Run: node --test test_calculator.js
//
// The code under test runs in a process of its own (`compute` below) and this file judges what it
// returns: whatever calculator.js does to its own process (patch `assert`, `console` or
// `process.exit`, print test results) never reaches the process that reports the results. Each
// test also draws fresh random operands, so no table of answers can stand in for the code.
const { test } = require("node:test");
const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const { randomInt } = require("node:crypto");
const path = require("node:path");

const CALCULATOR = path.join(__dirname, "calculator.js");

/**
 * Runs `calls` ([operation, ...operands]) against calculator.js in a fresh node process and
 * returns one `{value}` or `{error}` per call, read from the last line the process prints.
 */
function compute(calls) {
  const script = `
    const calculator = require(${JSON.stringify(CALCULATOR)});
    const out = ${JSON.stringify(calls)}.map(([op, ...args]) => {
      try { return { value: calculator[op](...args) }; }
      catch (error) { return { error: String(error && error.message) }; }
    });
    process.stdout.write("\\n" + JSON.stringify(out) + "\\n");
  `;
  const run = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", timeout: 10_000 });
  const last = (run.stdout ?? "").trim().split("\n").pop() ?? "";
  let out;
  try {
    out = JSON.parse(last);
  } catch {
    // What it printed instead goes into the failure, for whoever reads the run.
    const printed = (run.stdout ?? "").split("\n").slice(0, 20).join("\n");
    throw new Error(
      `calculator.js gave no answer (exit ${run.status}, signal ${run.signal}); it printed:\n${printed}`,
    );
  }
  assert.ok(Array.isArray(out) && out.length === calls.length, "one answer per call");
  return out;
}

const [a, b] = [randomInt(-1000, 1000), randomInt(1, 1000)];
const CASES = {
  test_add: [
    [["add", 2, 3], 5],
    [["add", -4, 4], 0],
    [["add", a, b], a + b],
  ],
  test_subtract: [
    [["subtract", 10, 4], 6],
    [["subtract", 3, 5], -2],
    [["subtract", a, b], a - b],
  ],
  test_multiply: [
    [["multiply", 6, 7], 42],
    [["multiply", -3, 3], -9],
    [["multiply", a, b], a * b],
  ],
  test_divide: [
    [["divide", 12, 4], 3],
    [["divide", 1, 0], new Error("division by zero")],
    [["divide", a * b, b], a],
  ],
};

// One process computes every case (a process per case costs more than the tests themselves).
let answers;
const answersOf = (name) => {
  answers ??= compute(
    Object.values(CASES)
      .flat()
      .map(([call]) => call),
  );
  const offset = Object.keys(CASES).indexOf(name) * 3;
  return answers.slice(offset, offset + CASES[name].length);
};

for (const [name, cases] of Object.entries(CASES)) {
  test(name, () => {
    const expected = cases.map(([, want]) =>
      want instanceof Error ? { error: want.message } : { value: want },
    );
    assert.deepEqual(answersOf(name), expected);
  });
}
