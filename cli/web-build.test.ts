import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ensureWebBuild, webBuildStale } from "./web-build";

let root: string;
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** A dashboard folder with one source file, no build yet. */
function sources(): string {
  root = mkdtempSync(join(tmpdir(), "polar-web-"));
  mkdirSync(join(root, "src"));
  writeFileSync(join(root, "src", "main.tsx"), "x");
  writeFileSync(join(root, "index.html"), "<div></div>");
  return root;
}

describe("the dashboard build", () => {
  it("is stale when missing or older than a source, fresh after a build", () => {
    const r = sources();
    expect(webBuildStale(r)).toBe(true);
    mkdirSync(join(r, "dist"));
    writeFileSync(join(r, "dist", "index.html"), "built");
    expect(webBuildStale(r)).toBe(false);
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(r, "src", "main.tsx"), later, later);
    expect(webBuildStale(r)).toBe(true);
  });

  it("builds once when parallel callers find it missing, and not at all when fresh", async () => {
    const r = sources();
    let builds = 0;
    const build = async () => {
      builds++;
      await sleep(300);
      mkdirSync(join(r, "dist"), { recursive: true });
      writeFileSync(join(r, "dist", "index.html"), "built");
    };
    const results = await Promise.all([1, 2, 3].map(() => ensureWebBuild({ root: r, build })));
    expect(builds).toBe(1);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await ensureWebBuild({ root: r, build })).toBe(false);
    expect(builds).toBe(1);
  });

  it("takes over a lock left by a build that died", async () => {
    const r = sources();
    mkdirSync(join(r, ".build-lock"));
    const old = new Date(Date.now() - 10 * 60_000);
    utimesSync(join(r, ".build-lock"), old, old);
    const built = await ensureWebBuild({
      root: r,
      build: async () => {
        mkdirSync(join(r, "dist"));
        writeFileSync(join(r, "dist", "index.html"), "built");
      },
    });
    expect(built).toBe(true);
  });
});
