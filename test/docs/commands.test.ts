/**
 * Every command block of README.md, docs/*.md, examples/ and the client packages' READMEs (fenced
 * `sh`/`bash`/`shell`/`console` or untagged blocks, and `doc-test:` comment blocks of example files such as a topology's
 * header) is run or checked here by the method its annotation declares, so the docs cannot drift
 * from what the code does. A block without a method fails, with the lines to add.
 *
 * Methods (test/support/doc-blocks.ts; the checks in doc-checks.ts, `run` in doc-run.ts):
 * `run` for real against a local stack, `cli` (a synopsis parsed by the real CLI parser), `ci` (a
 * command .ci/run executes), `apt` (packages .ci/run installs), `account` (needs a Cloudflare
 * account: --help, deploy --dry-run), `covered FILE` (run by a test CI runs), `syntax REASON`
 * (bash -n, for what no test machine has). Placeholders of `run` blocks: PLACEHOLDERS in doc-run.ts.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_TOKENS } from "../../cli/dev-tokens";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { freePort } from "../../cli/ports";
import { type PolarProcess, spawnPolar, waitForProcessHttp } from "../../cli/processes";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import {
  ANNOTATION_HELP,
  allBlocks,
  commandsOf,
  type DocCommand,
  missingAnnotationMessage,
} from "../support/doc-blocks";
import {
  checkAccount,
  checkApt,
  checkCi,
  checkCovered,
  checkSynopsis,
  checkSyntax,
} from "../support/doc-checks";
import { runBlock, type SharedStack } from "../support/doc-run";
import { itWith, type Need } from "../support/optional-tools";

const blocks = allBlocks(REPO_ROOT);
const annotated = blocks.filter((b) => b.annotation);
const needsStack = annotated.some((b) => commandsOf(b).some((c) => c.method.name === "run"));
const handled: Array<{ where: string; method: string; note: string }> = [];
const started = Date.now();

let stack: LocalStack | null = null;
let engine2: PolarProcess | null = null;
let shared: SharedStack;

beforeAll(async () => {
  if (!needsStack) return;
  // The documented dev tokens, so pages that write them literally (polar-dev-gateway-token) run.
  stack = await startLocalStack({ gateways: 0, tokens: DEV_TOKENS });
  const port2 = await freePort();
  engine2 = spawnPolar("sim-engine 2", ["sim-engine", "--port", String(port2)]);
  await waitForProcessHttp(engine2, `http://127.0.0.1:${port2}/health`);
  shared = {
    cpPort: stack.controlPlane.port,
    enginePort: Number(new URL(stack.engineUrl).port),
    engine2Port: port2,
    tokens: DEV_TOKENS,
  };
}, 180_000);

afterAll(async () => {
  await engine2?.stop();
  await stack?.stop();
  const width = Math.max(...handled.map((h) => h.where.length));
  console.log(
    `doc test: ${handled.length} commands in ${annotated.length} blocks, ${((Date.now() - started) / 1000).toFixed(0)} s\n${handled
      .map((h) => `${h.where.padEnd(width)}  ${h.method.padEnd(8)} ${h.note}`)
      .join("\n")}`,
  );
});

const label = (c: DocCommand) => `${c.block.file}:${c.line} ${c.text.replaceAll("\n", " ").slice(0, 60)}`;

async function check(c: DocCommand): Promise<string> {
  switch (c.method.name) {
    case "cli":
      return checkSynopsis(c);
    case "ci":
      return checkCi(c);
    case "apt":
      return checkApt(c);
    case "account":
      return checkAccount(c);
    case "covered":
      return checkCovered(c);
    case "syntax":
      return checkSyntax(c);
    case "run":
      throw new Error("run commands are run per block");
  }
}

describe("documented commands", () => {
  // The blocks run `npx polar` as node and the bin (PLACEHOLDERS): npx itself is checked here once.
  it("npx polar, from the repository root, is this repository's bin", async () => {
    const { stdout } = await execa("npx", ["polar", "--version"], { cwd: REPO_ROOT, env: { NO_COLOR: "1" } });
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
      version: string;
    };
    expect(stdout.trim()).toBe(version);
  });

  it("every command block declares how the doc test runs it", () => {
    const missing = blocks.filter((b) => !b.annotation);
    if (missing.length)
      throw new Error(
        `${missing.length} block(s) without a usable doc-test method:\n\n${missing.map(missingAnnotationMessage).join("\n\n")}\n\n${ANNOTATION_HELP}`,
      );
    expect(annotated.length).toBe(blocks.length);
  });

  for (const block of annotated) {
    const commands = commandsOf(block);
    const where = `${block.file}:${block.line}`;
    // A block that installs a Python package needs python3 with pip, which Node 20 alone lacks:
    // without them it is skipped with the summary line (a failure under POLAR_TEST_REQUIRE_ALL).
    const needs: Need[] = commands.some(
      (c) => c.method.name === "run" && /^(pip|python3 -m pip) install\b/.test(c.text),
    )
      ? ["python3", "pip"]
      : [];
    itWith(
      needs,
      `${where} (${[...new Set(commands.map((c) => c.method.name))].join(", ") || "no command"})`,
      { timeout: 300_000 },
      async () => {
        expect(commands.length, `${where}: the block holds no command`).toBeGreaterThan(0);
        const runs = commands.filter((c) => c.method.name === "run");
        for (const c of commands.filter((x) => x.method.name !== "run")) {
          let note: string;
          try {
            note = await check(c);
          } catch (err) {
            throw new Error(
              `${c.block.file}:${c.line}: \`${c.text}\` (${c.method.name}): ${(err as Error).message}`,
            );
          }
          handled.push({ where: label(c), method: c.method.name, note });
        }
        if (runs.length) {
          for (const r of await runBlock(runs, shared))
            handled.push({ where: label(r.command), method: "run", note: r.note });
        }
      },
    );
  }
});
