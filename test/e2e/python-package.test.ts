/**
 * The Python trainer package (clients/python, `polar_trainer`) runs its pytest suites here: the
 * pure units (samples, groups, advantages, export, templates, errors, SSE, the fence client against
 * a stand-in of the fence routes, the slime bridge against a stand-in of slime's `Sample`), the
 * install check, and the end-to-end suites against this local stack (client, scheduler, SIGKILLed
 * trainer restarts, eval mode, slime bridge). The stack is started here (token mode, one gateway
 * with 4 slots per stage) and handed to pytest as `POLAR_STACK_JSON`, the line
 * scripts/stack-json.ts prints.
 */
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { describeWith, probe } from "../support/optional-tools";

const PACKAGE = join(REPO_ROOT, "clients/python");
const ready = probe("python3") === null && probe("pytest") === null;

let stack: LocalStack | undefined;

beforeAll(async () => {
  if (!ready) return;
  stack = await startLocalStack({
    gateways: 1,
    engine: "sglang",
    gatewayArgs: ["--max-run=4", "--max-init=4", "--max-postrun=4"],
  });
});

afterAll(async () => {
  await stack?.stop();
});

describeWith(["python3", "pytest"], "the polar_trainer package's pytest suites", () => {
  it("every pytest suite passes against the real local stack", { timeout: 900_000 }, async () => {
    const s = stack!;
    const info = {
      url: s.controlPlane.url,
      tokens: s.tokens,
      engine_url: s.engineUrl,
      model: s.model,
      root: s.root,
      gateways: s.gateways.map((_, i) => `node-${i}`),
    };
    const run = await execa("python3", ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], {
      cwd: PACKAGE,
      env: { POLAR_STACK_JSON: JSON.stringify(info), PYTHONDONTWRITEBYTECODE: "1" },
      reject: false,
      timeout: 880_000,
      all: true,
    });
    const summary = run.all?.trim().split("\n").at(-1) ?? "";
    expect(run.exitCode, run.all).toBe(0);
    // Nothing skipped: every suite ran against the stack.
    expect(summary).toMatch(/^\d+ passed in /);
  });
});
