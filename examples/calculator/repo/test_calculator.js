// Tests of calculator.js. Run: node test_calculator.js
// Prints one line per test, `PASSED <name>` or `FAILED <name> - <reason>` (the format the
// test_on_output evaluator parses), then a summary; exits 1 when a test fails.
const assert = require("node:assert/strict");
const { add, subtract, multiply, divide } = require("./calculator.js");

const tests = {
  test_add: () => {
    assert.equal(add(2, 3), 5);
    assert.equal(add(-4, 4), 0);
  },
  test_subtract: () => {
    assert.equal(subtract(10, 4), 6);
    assert.equal(subtract(3, 5), -2);
  },
  test_multiply: () => {
    assert.equal(multiply(6, 7), 42);
    assert.equal(multiply(-3, 3), -9);
  },
  test_divide: () => {
    assert.equal(divide(12, 4), 3);
    assert.throws(() => divide(1, 0), /division by zero/);
  },
};

let failed = 0;
for (const [name, test] of Object.entries(tests)) {
  try {
    test();
    console.log(`PASSED ${name}`);
  } catch (error) {
    failed++;
    console.log(`FAILED ${name} - ${String(error.message).split("\n")[0]}`);
  }
}
console.log(`${Object.keys(tests).length - failed} passed, ${failed} failed`);
process.exitCode = failed === 0 ? 0 : 1;
