/**
 * The optional-tools mechanism itself: probes that really run the tool, the run/skip/fail plan,
 * the summary lines, and a real nested vitest run (two test files, so two worker processes) whose
 * suites need tools that cannot exist: skipped and summarised by default, failed in strict mode.
 */
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import {
  itWith,
  MissingToolError,
  type OptionalTool,
  PROBE_CACHE_ENV,
  planFor,
  probe,
  probeShared,
  pythonModule,
  runs,
  STRICT_ENV,
  sandboxPytestProblem,
  strictMode,
} from "./optional-tools";
import { formatSummary, summarizeTools } from "./optional-tools-reporter";

const FIXTURE_CONFIG = path.join(import.meta.dirname, "fixtures", "optional-tools", "vitest.config.ts");

const nowhere: OptionalTool = {
  name: "polar-no-such-tool",
  install: "apt-get install polar-no-such-tool",
  probe: () => runs("polar-no-such-tool-4f1c9e", ["--version"]),
};
const present: OptionalTool = {
  name: "node",
  install: "-",
  probe: () => runs(process.execPath, ["-e", "0"]),
};

/** Runs the fixture project in a child vitest, without the parent run's VITEST_* state. */
async function runFixtures(strict: boolean) {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env))
    if (v !== undefined && !k.startsWith("VITEST") && k !== STRICT_ENV) env[k] = v;
  if (strict) env[STRICT_ENV] = "1";
  return execa(
    process.execPath,
    [path.join(REPO_ROOT, "node_modules/vitest/vitest.mjs"), "run", "--config", FIXTURE_CONFIG],
    { env: { ...env, NO_COLOR: "1", FORCE_COLOR: "0" }, extendEnv: false, reject: false, all: true },
  );
}

describe("probes run the tool", () => {
  it("a command on no PATH is not installed; a file that cannot execute is not usable; an exit code is named", () => {
    expect(runs("polar-no-such-tool-4f1c9e", [])).toBe(
      "`polar-no-such-tool-4f1c9e` is not installed (not on PATH)",
    );
    expect(runs("/dev/null", ["--version"])).toBe("`/dev/null` is on PATH but cannot be executed");
    expect(runs("bash", ["-c", "echo broken >&2; exit 3"])).toBe(
      "`bash -c echo broken >&2; exit 3` exited with 3: broken",
    );
    expect(runs(process.execPath, ["-e", "0"])).toBeNull();
  });

  it("probe() names the tool, its install command and the reason", () => {
    expect(probe(nowhere)).toEqual({
      tool: "polar-no-such-tool",
      install: "apt-get install polar-no-such-tool",
      reason: "`polar-no-such-tool-4f1c9e` is not installed (not on PATH)",
    });
    expect(probe(present)).toBeNull();
  });

  it("pythonModule imports the module with the host's python3; the install command can name a requirements file", () => {
    const gone = pythonModule("polar_no_such_module_4f1c9e", "polar-no-such", "pip install -r req.txt");
    expect(probe(gone)).toMatchObject({
      tool: "python package polar-no-such",
      install: "pip install -r req.txt",
    });
    expect(probe(gone)?.reason).toMatch(/No module named 'polar_no_such_module_4f1c9e'|python3/);
    expect(pythonModule("json").install).toBe("pip install json");
  });

  itWith(
    ["bubblewrap"],
    "pytest in the sandbox: a python3 that only the host sees (in the hidden home) does not count",
    async () => {
      const home = await mkdtemp(path.join(tmpdir(), "polar-probe-home-"));
      try {
        await mkdir(path.join(home, "bin"));
        const withFake = async (exit: number) => {
          await writeFile(path.join(home, "bin", "python3"), `#!/bin/sh\nexit ${exit}\n`);
          await chmod(path.join(home, "bin", "python3"), 0o755);
          const env = { ...process.env, HOME: home, PATH: `${path.join(home, "bin")}:${process.env.PATH}` };
          return {
            host: runs("python3", ["-m", "pytest", "--version"], env),
            sandbox: sandboxPytestProblem(env),
          };
        };
        const ok = await withFake(0);
        const broken = await withFake(1);
        // The host finds the fake first; the sandbox does not see it, so its answer is the same either way.
        expect(ok.host).toBeNull();
        expect(broken.host).toMatch(/exited with 1/);
        expect(ok.sandbox).toBe(broken.sandbox);
        if (ok.sandbox !== null) expect(ok.sandbox).toContain(`bubblewrap sandbox (which hides ${home})`);
      } finally {
        await rm(home, { recursive: true, force: true });
      }
    },
  );
});

describe("plan of a suite", () => {
  it("runs with every tool, skips without a required one, fails in strict mode", () => {
    expect(planFor([present], "s", false)).toEqual({ mode: "run" });
    const skip = planFor([present, nowhere], "s", false);
    expect(skip.mode).toBe("skip");
    expect(skip.meta).toMatchObject({
      state: "skipped",
      label: "s",
      missing: [{ tool: "polar-no-such-tool" }],
    });
    expect(planFor([nowhere], "s", true)).toMatchObject({ mode: "fail", meta: { state: "failed" } });
  });

  it("a preferred tool: runs without it (recorded as degraded), but is required in strict mode", () => {
    const needs = { require: [present], prefer: [{ tool: nowhere, without: "unsandboxed" }] };
    expect(planFor(needs, "s", false)).toMatchObject({
      mode: "run",
      meta: { state: "degraded", missing: [{ tool: "polar-no-such-tool", without: "unsandboxed" }] },
    });
    expect(planFor(needs, "s", true).mode).toBe("fail");
  });

  it("strict mode is POLAR_TEST_REQUIRE_ALL set to anything but empty, 0 or false", () => {
    expect(strictMode({})).toBe(false);
    expect(strictMode({ [STRICT_ENV]: "0" })).toBe(false);
    expect(strictMode({ [STRICT_ENV]: "false" })).toBe(false);
    expect(strictMode({ [STRICT_ENV]: "1" })).toBe(true);
  });

  it("the strict failure names the tool, why and how to install it", () => {
    const err = new MissingToolError([probe(nowhere)!]);
    expect(err.message).toBe(
      "polar-no-such-tool is required (POLAR_TEST_REQUIRE_ALL=1) but unavailable: `polar-no-such-tool-4f1c9e` is not installed (not on PATH); install: apt-get install polar-no-such-tool",
    );
  });
});

describe("summary", () => {
  it("one line per tool; a suite's children (which inherit its meta) count once", () => {
    const missing = [{ tool: "bubblewrap", install: "apt-get install bubblewrap", reason: "gone" }];
    const skipped = { state: "skipped" as const, label: "sandbox", missing };
    const degraded = (label: string) => ({
      state: "degraded" as const,
      label,
      missing: [{ ...missing[0]!, without: "unsandboxed" }],
    });
    const lines = formatSummary(
      summarizeTools([
        { file: "a.test.ts", meta: skipped },
        { file: "a.test.ts", meta: skipped },
        { file: "b.test.ts", meta: degraded("cli 2") },
        { file: "b.test.ts", meta: degraded("cli 1") },
      ]),
    );
    expect(lines).toEqual([
      "Optional tools missing (1): suites skipped or run without them (POLAR_TEST_REQUIRE_ALL=1 makes this a failure):",
      '  bubblewrap — skipped 1: a.test.ts "sandbox" | ran without it 2: b.test.ts "cli 1", "cli 2" (unsandboxed) — gone — install: apt-get install bubblewrap',
    ]);
    expect(formatSummary([])).toEqual([]);
  });
});

describe("a real vitest run with tools that cannot exist", { timeout: 60_000 }, () => {
  it("default: the suites are skipped, the run passes, the summary names the suites of both files and the install command", async () => {
    const run = await runFixtures(false);
    expect(run.exitCode).toBe(0);
    expect(run.all).toMatch(/Tests\s+2 passed \| 4 skipped \(6\)/);
    expect(run.all).toContain(
      '  polar-no-such-tool — skipped 4: a.fixture.ts "a suite that needs a tool that cannot exist", "case one needs it too", "case two needs it too"; b.fixture.ts "a test that needs the same tool" — `polar-no-such-tool-4f1c9e` is not installed (not on PATH) — install: apt-get install polar-no-such-tool',
    );
    expect(run.all).toContain(
      '  polar-dev-null-tool — ran without it 1: b.fixture.ts "a suite that prefers a tool" (runs the plain path instead) — `/dev/null` is on PATH but cannot be executed — install: pip install polar-dev-null-tool',
    );
  });

  it(`${STRICT_ENV}=1: the same suites fail with the reason and the run fails`, async () => {
    const run = await runFixtures(true);
    expect(run.exitCode).toBe(1);
    expect(run.all).toMatch(/Tests\s+5 failed \| 1 passed \(6\)/);
    expect(run.all).toContain(
      "MissingToolError: polar-no-such-tool is required (POLAR_TEST_REQUIRE_ALL=1) but unavailable: `polar-no-such-tool-4f1c9e` is not installed (not on PATH); install: apt-get install polar-no-such-tool",
    );
    expect(run.all).toContain("Optional tools REQUIRED by POLAR_TEST_REQUIRE_ALL=1 but missing (2):");
    expect(run.all).toMatch(/polar-no-such-tool — FAILED 4: a\.fixture\.ts/);
  });
});

describe("probes shared by the files of one run", () => {
  it("a tool found working is noted and not probed again; a missing one is probed every time", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "polar-probe-cache-"));
    const before = process.env[PROBE_CACHE_ENV];
    process.env[PROBE_CACHE_ENV] = dir;
    try {
      let calls = 0;
      const works: OptionalTool = {
        name: "works",
        install: "-",
        probe: () => {
          calls++;
          return null;
        },
      };
      expect(probeShared("works", works)).toBeNull();
      expect(probeShared("works", works)).toBeNull();
      expect(calls).toBe(1);
      let missingCalls = 0;
      const missing: OptionalTool = {
        name: "missing",
        install: "-",
        probe: () => {
          missingCalls++;
          return "not here";
        },
      };
      expect(probeShared("missing", missing)).toBe("not here");
      expect(probeShared("missing", missing)).toBe("not here");
      expect(missingCalls).toBe(2);
    } finally {
      if (before === undefined) delete process.env[PROBE_CACHE_ENV];
      else process.env[PROBE_CACHE_ENV] = before;
      await rm(dir, { recursive: true, force: true });
    }
  });
});
