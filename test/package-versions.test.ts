/**
 * The version policy: every Polar-TS package — the workspace, the gateway, the control plane, the
 * TypeScript client, the Python trainer and the reference engine — carries one version, released
 * together, so "gateway 0.2.0 with control plane 0.2.0" needs no compatibility table (versions
 * apart are what the wire version checked at `hello` is for). A release bumps them all and adds
 * the version's entry on top of each CHANGELOG.md.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../cli/wrangler-dev";

const read = (path: string) => readFileSync(join(REPO_ROOT, path), "utf8");
const npmVersion = (path: string) => (JSON.parse(read(path)) as { version: string }).version;
const pyprojectVersion = (path: string) =>
  (parseToml(read(path)) as { project: { version: string } }).project.version;
/** `__version__ = "…"` of a Python package's `__init__.py` (what the code reports at run time). */
const pythonVersion = (path: string) => /^__version__ = "([^"]+)"$/m.exec(read(path))?.[1];

/** Every place a package states its version, by package. */
const MANIFESTS: Record<string, () => string | undefined> = {
  "polar-ts (package.json)": () => npmVersion("package.json"),
  "@polar-ts/gateway": () => npmVersion("packages/polar-gateway/package.json"),
  "@polar-ts/control-plane": () => npmVersion("packages/polar-control-plane/package.json"),
  "@polar-ts/client": () => npmVersion("clients/typescript/package.json"),
  "polar-trainer (pyproject.toml)": () => pyprojectVersion("clients/python/pyproject.toml"),
  "polar_trainer.__version__": () => pythonVersion("clients/python/src/polar_trainer/__init__.py"),
  "polar-reference-engine (pyproject.toml)": () =>
    pyprojectVersion("clients/reference-engine/pyproject.toml"),
  "polar_reference_engine.__version__": () =>
    pythonVersion("clients/reference-engine/src/polar_reference_engine/__init__.py"),
};

/** The packages' changelogs; the gateway's is checked once it has one. */
const CHANGELOGS = [
  "packages/polar-gateway/CHANGELOG.md",
  "packages/polar-control-plane/CHANGELOG.md",
  "clients/typescript/CHANGELOG.md",
  "clients/python/CHANGELOG.md",
  "clients/reference-engine/CHANGELOG.md",
];

describe("package versions", () => {
  const version = npmVersion("package.json");

  it("every package carries the workspace's version, a semver", () => {
    expect(version).toMatch(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/);
    const found = Object.fromEntries(Object.entries(MANIFESTS).map(([name, get]) => [name, get()]));
    expect(found).toEqual(Object.fromEntries(Object.keys(MANIFESTS).map((name) => [name, version])));
  });

  it("each changelog's newest entry is that version", () => {
    const present = CHANGELOGS.filter((f) => existsSync(join(REPO_ROOT, f)));
    expect(present.length).toBeGreaterThanOrEqual(4);
    // `## 0.1.0` or keep-a-changelog's `## [0.1.0] - 2026-12-03`; an "Unreleased" heading may sit above.
    for (const file of present)
      expect(/^## \[?(\d+\.\d+\.\d+[^\]\s]*)/m.exec(read(file))?.[1], file).toBe(version);
  });
});
