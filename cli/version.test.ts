import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PACKAGE_ROOT, polarVersion } from "./version";

describe("polarVersion", () => {
  it("reads the repository's package.json from a clone", () => {
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as { version: string };
    expect(polarVersion()).toBe(pkg.version);
    expect(polarVersion()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("reads the package.json of the given root, and names it when it has no version", () => {
    const dir = mkdtempSync(join(tmpdir(), "polar-version-"));
    try {
      writeFileSync(join(dir, "package.json"), JSON.stringify({ version: "9.8.7" }));
      expect(polarVersion(dir)).toBe("9.8.7");
      writeFileSync(join(dir, "package.json"), "{}");
      expect(() => polarVersion(dir)).toThrow(`${join(dir, "package.json")}: no "version"`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
