/**
 * A launcher for the reaper tests: starts one child under the reaper (`startSupervised`) — a node
 * process that starts a grandchild in its own process group and then idles — prints `started`, and
 * idles until it is killed. With `stubborn` the child ignores SIGTERM (the reaper must escalate).
 * Test-only: `node --import tsx test/support/supervise-launcher.ts [stubborn]`.
 *
 * @module
 */
import { startSupervised } from "../../cli/child-process";

const stubborn = process.argv[2] === "stubborn";
const code = `
const { spawn } = require("node:child_process");
spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
${stubborn ? 'process.on("SIGTERM", () => {});' : ""}
setInterval(() => {}, 1000);
`;
startSupervised("tree", process.execPath, ["-e", code]);
console.log("started");
setInterval(() => {}, 1000);
