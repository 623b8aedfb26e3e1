import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentSpec, RuntimeSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import { hiddenInSandbox } from "../runtime/bwrap";
import { HarnessAvailability } from "./availability";

let root: string;
/**
 * A folder the sandbox would show: outside /tmp (its private tmpfs) and the home. The checkout's
 * own folder, unless the checkout is itself under /tmp; then /var/tmp, which the sandbox leaves visible.
 */
let visible: string;
const visibleBase = hiddenInSandbox(import.meta.dirname, { workRoot: tmpdir() })
  ? "/var/tmp"
  : import.meta.dirname;

async function fakeCli(dir: string, bin: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, bin);
  await writeFile(file, "#!/bin/sh\necho fake\n");
  await chmod(file, 0o755);
  return file;
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "polar-avail-"));
  visible = await mkdtemp(path.join(visibleBase, ".avail-test-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
  await rm(visible, { recursive: true, force: true });
});

/** A PATH entry with nothing in it: no real CLI installed on this machine can leak into a check. */
const systemPath = () => path.join(root, "empty-bin");
const agent = (harness: string, settings: Record<string, unknown> = {}) =>
  AgentSpec.parse({ harness, settings });

describe("HarnessAvailability", () => {
  it("under bubblewrap: a missing CLI is unavailable, naming why and the fix", () => {
    const h = new HarnessAvailability({
      sandboxed: true,
      workRoot: path.join(root, "work"),
      env: { PATH: path.join(root, "empty-bin") },
    });
    const codex = h.check("codex");
    expect(codex).toMatchObject({ available: false, via: null, cli: null });
    expect(codex.reason).toBe(
      "the 'codex' CLI is not on the sessions' PATH (POLAR_HARNESS_DIR is not set), and its install step cannot run: local sessions run in bubblewrap, where the host filesystem is read-only (and offline sessions have no network)",
    );
    expect(codex.fix).toBe(
      "on the gateway host run polar harnesses install codex --dir .polar/harnesses, then restart the gateway with POLAR_HARNESS_DIR=.polar/harnesses",
    );
    expect(h.check("mini_swe_agent").fix).toContain("install mini-swe-agent==2.4.2");
    expect(Object.keys(h.report())).toEqual([
      "claude_code",
      "codex",
      "qwen_code",
      "opencode",
      "gemini_cli",
      "pi",
      "mini_swe_agent",
      "copilot_cli",
      "cline",
      "kilo_code",
      "continue",
      "grok_cli",
      "nanocoder",
    ]);
  });

  it("finds a CLI pre-installed under POLAR_HARNESS_DIR/bin, also under /tmp (the sandbox re-binds it)", async () => {
    const dir = path.join(root, "harnesses");
    const cli = await fakeCli(path.join(dir, "bin"), "pi");
    const h = new HarnessAvailability({
      sandboxed: true,
      workRoot: path.join(root, "work"),
      env: { PATH: systemPath(), POLAR_HARNESS_DIR: dir },
    });
    expect(h.check("pi")).toEqual({ available: true, via: "installed", cli, reason: null, fix: null });
    expect(h.check("codex").reason).toContain(`POLAR_HARNESS_DIR=${dir} has no bin/codex`);
    expect(h.check("codex").fix).toContain(`POLAR_HARNESS_DIR=${dir}`);
  });

  it("a CLI on PATH in a folder the sandbox hides does not count under bubblewrap; elsewhere it does", async () => {
    const hidden = await fakeCli(path.join(root, "hidden-bin"), "opencode");
    const shown = await fakeCli(path.join(visible, "bin"), "opencode");
    const env = (dir: string) => ({
      PATH: `${path.dirname(dir)}:${systemPath()}`,
      HOME: path.join(root, "home"),
    });
    const work = path.join(root, "work");
    const inTmp = new HarnessAvailability({ sandboxed: true, workRoot: work, env: env(hidden) }).check(
      "opencode",
    );
    expect(inTmp.available).toBe(false);
    expect(inTmp.reason).toContain(`the 'opencode' CLI (${hidden}) is in a folder the sandbox hides`);
    expect(
      new HarnessAvailability({ sandboxed: true, workRoot: work, env: env(shown) }).check("opencode"),
    ).toMatchObject({ available: true, via: "installed", cli: shown });
    // A symlink in a visible folder that points into a hidden one is hidden too.
    const link = path.join(visible, "links", "opencode");
    await mkdir(path.dirname(link), { recursive: true });
    await symlink(hidden, link);
    expect(
      new HarnessAvailability({ sandboxed: true, workRoot: work, env: env(link) }).check("opencode")
        .available,
    ).toBe(false);
    // Without the sandbox every folder is visible.
    expect(
      new HarnessAvailability({ sandboxed: false, workRoot: work, env: env(hidden) }).check("opencode"),
    ).toMatchObject({ available: true, via: "installed" });
  });

  it("without bubblewrap: the install step counts when npm is there and answers its prefix, not without npm", async () => {
    const work = path.join(root, "work");
    // A stand-in npm on PATH (a real process): `npm prefix -g` prints a writable folder.
    const prefix = path.join(root, "npm-prefix");
    const good = path.join(root, "npm-good");
    await fakeCli(good, "npm");
    await writeFile(path.join(good, "npm"), `#!/bin/sh\n[ "$1 $2" = "prefix -g" ] && echo '${prefix}'\n`);
    const withNpm = new HarnessAvailability({
      sandboxed: false,
      workRoot: work,
      env: { PATH: `${good}:${systemPath()}` },
    });
    expect(withNpm.check("claude_code")).toEqual({
      available: true,
      via: "install_step",
      cli: null,
      reason: null,
      fix: null,
    });
    // install: false leaves only an installed CLI.
    expect(withNpm.check("claude_code", { install: false }).reason).toContain(
      "its install step cannot run: agent.settings.install is false",
    );
    const broken = path.join(root, "npm-broken");
    await fakeCli(broken, "npm");
    await writeFile(path.join(broken, "npm"), "#!/bin/sh\nexit 1\n");
    const failing = new HarnessAvailability({
      sandboxed: false,
      workRoot: work,
      env: { PATH: `${broken}:${systemPath()}` },
    });
    expect(failing.check("codex").reason).toContain("its install step cannot run: `npm prefix -g` failed");
    const noNpm = new HarnessAvailability({
      sandboxed: false,
      workRoot: work,
      env: { PATH: path.join(root, "empty-bin") },
    }).check("claude_code");
    expect(noNpm).toMatchObject({ available: false });
    expect(noNpm.reason).toContain("its install step cannot run: npm is not on the sessions' PATH");
  });

  it("require() throws a configuration failure for a local preset session only", () => {
    const h = new HarnessAvailability({
      sandboxed: true,
      workRoot: path.join(root, "work"),
      env: { PATH: path.join(root, "empty-bin") },
    });
    const local = RuntimeSpec.parse({});
    let thrown: unknown;
    try {
      h.require(agent("codex"), local, "gpu-7");
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(SessionFailure);
    expect((thrown as SessionFailure).kind).toBe("configuration");
    expect((thrown as SessionFailure).message).toMatch(
      /^agent\.harness: 'codex' is not available on gateway node 'gpu-7': the 'codex' CLI is not on the sessions' PATH .* Fix: on the gateway host run polar harnesses install codex --dir \.polar\/harnesses, then restart the gateway with POLAR_HARNESS_DIR=/,
    );
    // Containers bring their own CLI; shell and custom harnesses need none.
    expect(() =>
      h.require(agent("codex"), RuntimeSpec.parse({ backend: "docker", image: "i" }), "n"),
    ).not.toThrow();
    expect(() =>
      h.require(AgentSpec.parse({ harness: "shell", custom_shell: { command: "true" } }), local, "n"),
    ).not.toThrow();
    expect(() => h.require(AgentSpec.parse({ import_path: "./h.mjs:plan" }), local, "n")).not.toThrow();
  });
});
