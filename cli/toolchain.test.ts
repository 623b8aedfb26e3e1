import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  findControlPlanePackage,
  MissingToolchainError,
  missingToolchain,
  requireControlPlaneToolchain,
} from "./toolchain";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function root(files: string[], contents: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "polar-toolchain-"));
  dirs.push(dir);
  for (const f of files) {
    mkdirSync(join(dir, f, ".."), { recursive: true });
    writeFileSync(join(dir, f), f in contents ? JSON.stringify(contents[f]) : "");
  }
  return dir;
}

const CONTROL_PLANE = {
  name: "@polar-ts/control-plane",
  bin: { "polar-control-plane": "bin/polar-control-plane.mjs" },
};

describe("requireControlPlaneToolchain", () => {
  it("passes in the repository (wrangler.toml and wrangler installed)", () => {
    expect(() => requireControlPlaneToolchain("polar dev")).not.toThrow();
  });

  it("names the command and what is missing in a package without the toolchain", () => {
    const err = (() => {
      try {
        requireControlPlaneToolchain("polar deploy", root(["package.json"]));
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(MissingToolchainError);
    expect((err as Error).message).toContain("polar deploy");
    expect((err as Error).message).toContain("wrangler.toml");
    expect((err as Error).message).toContain(join("node_modules", ".bin", "wrangler"));
    expect((err as MissingToolchainError).exitCode).toBe(1);
  });

  it("refuses a folder with wrangler.toml but no wrangler", () => {
    expect(() => requireControlPlaneToolchain("polar dev", root(["wrangler.toml"]))).toThrow(
      /missing: node_modules.\.bin.wrangler\)/,
    );
  });
});

describe("findControlPlanePackage", () => {
  it("finds the control-plane package beside a global install of the gateway (both under @polar-ts/)", () => {
    const prefix = root(["lib/node_modules/@polar-ts/control-plane/package.json"], {
      "lib/node_modules/@polar-ts/control-plane/package.json": CONTROL_PLANE,
    });
    const gateway = join(prefix, "lib/node_modules/@polar-ts/gateway");
    mkdirSync(gateway, { recursive: true });
    writeFileSync(join(gateway, "package.json"), JSON.stringify({ name: "@polar-ts/gateway" }));
    expect(missingToolchain(gateway)).toEqual(["wrangler.toml", join("node_modules", ".bin", "wrangler")]);
    expect(findControlPlanePackage(gateway)).toBe(
      join(prefix, "lib/node_modules/@polar-ts/control-plane/bin/polar-control-plane.mjs"),
    );
  });

  it("finds it as a dependency of the folder, and ignores another package under that name's folder", () => {
    const project = root(["package.json", "node_modules/@polar-ts/control-plane/package.json"], {
      "package.json": { name: "trainer-box" },
      "node_modules/@polar-ts/control-plane/package.json": CONTROL_PLANE,
    });
    expect(findControlPlanePackage(project)).toBe(
      join(project, "node_modules/@polar-ts/control-plane/bin/polar-control-plane.mjs"),
    );
    const impostor = root(
      ["lib/@polar-ts/control-plane/package.json", "lib/@polar-ts/gateway/package.json"],
      {
        "lib/@polar-ts/control-plane/package.json": { name: "someone-else", bin: CONTROL_PLANE.bin },
        "lib/@polar-ts/gateway/package.json": { name: "@polar-ts/gateway" },
      },
    );
    expect(findControlPlanePackage(join(impostor, "lib/@polar-ts/gateway"))).toBeNull();
  });

  it("finds nothing from the repository (a clone deploys with its own toolchain)", () => {
    expect(missingToolchain()).toEqual([]);
    expect(findControlPlanePackage()).toBeNull();
  });
});
