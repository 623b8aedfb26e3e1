import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../cli/wrangler-dev";
import { bundleProblems, packagedConfig } from "./build-control-plane-package";

describe("packagedConfig", () => {
  it("keeps the repository's bindings and migrations and points main and assets into dist/", () => {
    const repo = parseToml(readFileSync(join(REPO_ROOT, "wrangler.toml"), "utf8")) as Record<string, unknown>;
    const packaged = packagedConfig(repo);
    expect(packaged.main).toBe("worker.js");
    expect(packaged.assets).toEqual({ ...(repo.assets as object), directory: "./assets" });
    expect(packaged.rules).toBeUndefined();
    for (const key of ["name", "durable_objects", "migrations", "r2_buckets", "compatibility_flags"])
      expect(packaged[key], key).toEqual(repo[key]);
  });

  it("refuses a config without an assets folder", () => {
    expect(() => packagedConfig({ main: "x.ts" })).toThrow(/\[assets\] directory/);
  });
});

describe("bundleProblems", () => {
  it("accepts runtime modules and the bound classes, names a bundled-out package and a missing class", () => {
    expect(
      bundleProblems(["cloudflare:workers", "node:async_hooks", "buffer"], ["BatchDO"], ["BatchDO"]),
    ).toEqual([]);
    expect(bundleProblems(["hono/factory"], ["default"], ["QueueDO"])).toEqual([
      "the Worker bundle still imports hono/factory (bundle it, or the installed package lacks it)",
      "the Worker does not export QueueDO, which wrangler.json binds",
    ]);
  });
});
