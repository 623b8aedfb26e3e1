/**
 * bin/cli-bundle.mjs: the CLI bundled once from the sources and reused while they are unchanged,
 * with the files the code finds beside itself copied in.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, statSync, utimesSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { bundledCli } from "../bin/cli-bundle.mjs";
import { REPO_ROOT } from "./wrangler-dev";

const bundle = bundledCli as (root: string) => Promise<string | null>;
const manifest = () =>
  JSON.parse(readFileSync(join(REPO_ROOT, ".polar-cli", "current.json"), "utf8")) as {
    entry: string;
    inputs: Record<string, [number, number]>;
  };

describe("the CLI bundle", () => {
  it("is built beside the repository root with the runtime assets, and reused while nothing changed", {
    timeout: 60_000,
  }, async () => {
    const entry = await bundle(REPO_ROOT);
    expect(entry).not.toBeNull();
    // One level below the root, so code that looks one level up finds the repository.
    expect(dirname(dirname(entry!))).toBe(REPO_ROOT);
    const assets = JSON.parse(readFileSync(join(REPO_ROOT, "cli", "runtime-assets.json"), "utf8")) as Array<{
      from: string;
      to: string;
    }>;
    for (const a of assets) expect(existsSync(join(dirname(entry!), a.to)), a.to).toBe(true);
    expect(readFileSync(join(dirname(entry!), "reaper.mjs"), "utf8")).toBe(
      readFileSync(join(REPO_ROOT, "cli", "reaper.mjs"), "utf8"),
    );
    expect(Object.keys(manifest().inputs)).toEqual(
      expect.arrayContaining([
        "cli/main.ts",
        "gateway-agent/runtime/sandbox-shim.mjs",
        "cli/runtime-assets.json",
        "cli/bundle-options.mjs",
      ]),
    );
    expect(await bundle(REPO_ROOT)).toBe(entry);
  });

  it("is built again when an input changes", { timeout: 60_000 }, async () => {
    await bundle(REPO_ROOT);
    const source = join(REPO_ROOT, "cli", "version.ts");
    const { atime } = statSync(source);
    const later = new Date(Date.now() + 1_000);
    utimesSync(source, atime, later);
    expect(manifest().inputs["cli/version.ts"]![1]).not.toBe(statSync(source).mtimeMs);
    await bundle(REPO_ROOT);
    expect(manifest().inputs["cli/version.ts"]![1]).toBe(statSync(source).mtimeMs);
  });

  it("is not used with POLAR_CLI_BUNDLE=0, and the command answers the same either way", async () => {
    const before = process.env.POLAR_CLI_BUNDLE;
    process.env.POLAR_CLI_BUNDLE = "0";
    try {
      expect(await bundle(REPO_ROOT)).toBeNull();
    } finally {
      if (before === undefined) delete process.env.POLAR_CLI_BUNDLE;
      else process.env.POLAR_CLI_BUNDLE = before;
    }
    const polar = (env: Record<string, string>) =>
      execFileSync(process.execPath, [join(REPO_ROOT, "bin", "polar.mjs"), "--version"], {
        env: { ...process.env, ...env },
        encoding: "utf8",
      });
    expect(polar({ POLAR_CLI_BUNDLE: "0" })).toBe(polar({ POLAR_CLI_BUNDLE: "1" }));
  });
});
