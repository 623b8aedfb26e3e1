/**
 * On-demand install of the harness CLIs, with the real install script and npm: a folder that
 * lacks a CLI is installed into (here against a registry that refuses connections, so the failure
 * path is what a machine without the registry sees), and a folder that has it needs no network.
 * The successful install of all five is exercised by test/e2e/harnesses.test.ts on a clean clone.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRESET_PACKAGES } from "../gateway-agent/harness";
import { ensureHarnesses, missingHarnesses } from "./ensure-harnesses";

let root: string;
let offline: Record<string, string>;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "polar-ensure-harnesses-"));
  // A port that was free a moment ago: connections to it are refused, like an unreachable registry.
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  offline = {
    npm_config_registry: `http://127.0.0.1:${port}/`,
    npm_config_fetch_retries: "0",
    npm_config_cache: join(root, "npm-cache"),
    npm_config_prefer_online: "true",
  };
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("ensureHarnesses", { timeout: 60_000 }, () => {
  it("a missing CLI it cannot install: not ok, with npm's error and the command to run", async () => {
    const dir = join(root, "empty");
    expect(missingHarnesses(dir, ["pi"])).toEqual(["pi"]);
    const r = await ensureHarnesses(["pi"], { dir, env: offline });
    expect(r.ok).toBe(false);
    expect(r.installed).toEqual([]);
    expect(r.reason).toMatch(/^scripts\/install-harnesses\.sh pi failed \(exit 1\): npm error/);
    expect(r.reason).toMatch(/ECONNREFUSED/);
    expect(r.reason).toMatch(/run scripts\/install-harnesses\.sh pi where the npm registry is reachable$/);
  });

  it("a CLI already installed at its pinned version: ok without any network", async () => {
    const dir = join(root, "installed");
    const { pkg, version, bin } = PRESET_PACKAGES.pi;
    const binDir = join(dir, "pi", "node_modules", ".bin");
    mkdirSync(binDir, { recursive: true });
    writeFileSync(join(binDir, bin), "#!/bin/sh\necho pi\n");
    chmodSync(join(binDir, bin), 0o755);
    writeFileSync(join(dir, "pi", ".polar-installed"), `${pkg}@${version}`);
    const r = await ensureHarnesses(["pi"], { dir, env: offline });
    expect(r).toMatchObject({ ok: true, installed: [] });
    expect(missingHarnesses(dir, ["pi"])).toEqual([]);
  });

  it("a CLI there at another version is reinstalled (and fails here for want of the registry)", async () => {
    const dir = join(root, "stale");
    const binDir = join(dir, "pi", "node_modules", ".bin");
    mkdirSync(binDir, { recursive: true });
    writeFileSync(join(binDir, PRESET_PACKAGES.pi.bin), "#!/bin/sh\n");
    chmodSync(join(binDir, PRESET_PACKAGES.pi.bin), 0o755);
    writeFileSync(join(dir, "pi", ".polar-installed"), `${PRESET_PACKAGES.pi.pkg}@0.0.1`);
    const r = await ensureHarnesses(["pi"], { dir, env: offline });
    expect(r.ok).toBe(false);
    expect(r.reason).toMatch(/ECONNREFUSED/);
  });
});
