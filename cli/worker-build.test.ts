import { existsSync, readFileSync, statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "./repo-root";
import { prebuiltWorker, WORKER_BUILD_DIR } from "./worker-build";

describe("prebuiltWorker", () => {
  it("builds the Worker once, reuses it while its inputs are unchanged, builds again after a change", {
    timeout: 120_000,
  }, async () => {
    const first = await prebuiltWorker();
    expect(existsSync(first)).toBe(true);
    // The bundle a deployment uploads: the control plane's Durable Object classes are exported.
    expect(readFileSync(first, "utf8")).toMatch(/export\s*\{[^}]*BatchDO/);
    const manifest = JSON.parse(readFileSync(join(WORKER_BUILD_DIR, "current.json"), "utf8")) as {
      inputs: Record<string, unknown>;
    };
    expect(Object.keys(manifest.inputs)).toEqual(
      expect.arrayContaining(["control-plane/index.ts", "wrangler.toml"]),
    );
    expect(await prebuiltWorker()).toBe(first);

    // A source touched (same content, new mtime) is a change.
    const source = join(REPO_ROOT, "control-plane", "index.ts");
    const { atime } = statSync(source);
    utimesSync(source, atime, new Date());
    const second = await prebuiltWorker();
    expect(second).not.toBe(first);
    expect(existsSync(second)).toBe(true);
    expect(await prebuiltWorker()).toBe(second);
  });
});
