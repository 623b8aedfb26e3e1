// A tiny calculator library. One of these operations has a bug; test_calculator.js finds it.

function add(a, b) {
  return a + b;
}

function subtract(a, b) {
  return a + b;
}

function multiply(a, b) {
  return a * b;
}

function divide(a, b) {
  if (b === 0) throw new Error("division by zero");
  return a / b;
}

module.exports = { add, subtract, multiply, divide };
