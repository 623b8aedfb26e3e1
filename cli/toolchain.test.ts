import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { MissingToolchainError, requireControlPlaneToolchain } from "./toolchain";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function root(files: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "polar-toolchain-"));
  dirs.push(dir);
  for (const f of files) {
    mkdirSync(join(dir, f, ".."), { recursive: true });
    writeFileSync(join(dir, f), "");
  }
  return dir;
}

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
