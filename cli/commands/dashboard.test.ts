import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_TOKENS } from "../dev-tokens";
import { UsageError } from "../usage-error";
import { REPO_ROOT } from "../wrangler-dev";
import { dashboardLink, openInBrowser } from "./dashboard";

const POLAR = join(REPO_ROOT, "bin", "polar.mjs");
/** The environment without any POLAR_* variable of the machine running the tests. */
const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("POLAR_")));

describe("dashboardLink", () => {
  it("signs in with the viewer token first, then trainer, then admin, URL-encoded in the fragment", () => {
    const env = { POLAR_VIEWER_TOKEN: "v/1+", POLAR_TRAINER_TOKEN: "t", POLAR_ADMIN_TOKEN: "a" };
    expect(dashboardLink("https://cp.example.org", env)).toEqual({
      url: "https://cp.example.org/#token=v%2F1%2B",
      base: "https://cp.example.org/",
      token_from: "POLAR_VIEWER_TOKEN",
    });
    expect(dashboardLink("https://cp.example.org/", { POLAR_TRAINER_TOKEN: "t" }).url).toBe(
      "https://cp.example.org/#token=t",
    );
    expect(dashboardLink("https://cp.example.org", { POLAR_ADMIN_TOKEN: "a" }).token_from).toBe(
      "POLAR_ADMIN_TOKEN",
    );
  });

  it("uses polar dev's token for a loopback control plane, none for a remote one", () => {
    expect(dashboardLink("http://127.0.0.1:8787", {})).toMatchObject({
      url: `http://127.0.0.1:8787/#token=${DEV_TOKENS.trainer}`,
      token_from: "dev",
    });
    expect(dashboardLink("https://cp.example.org/x?y=1#z", {})).toEqual({
      url: "https://cp.example.org/x/",
      base: "https://cp.example.org/x/",
      token_from: null,
    });
  });

  it("names --control-plane when it is not an http(s) URL", () => {
    expect(() => dashboardLink("not a url", {})).toThrow(UsageError);
    expect(() => dashboardLink("not a url", {})).toThrow(/^--control-plane: not a URL/);
    expect(() => dashboardLink("ftp://h", {})).toThrow(/^--control-plane: must be http/);
  });

  it("opens nothing and does not fail where there is no desktop", () => {
    if (process.platform === "darwin") return;
    expect(openInBrowser("http://127.0.0.1:1/", { PATH: process.env.PATH })).toBe(false);
    // A display but no opener on PATH: still no failure.
    expect(() =>
      openInBrowser("http://127.0.0.1:1/", { DISPLAY: ":99", PATH: "/nonexistent" }),
    ).not.toThrow();
  });
});

describe("polar dashboard (the command)", () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      res.writeHead(req.url === "/health" ? 200 : 404, { "content-type": "application/json" });
      res.end("{}");
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("prints the signed-in URL and whether the control plane answers, as JSON", async () => {
    const up = await execa(POLAR, ["dashboard", "--control-plane", url, "--json", "--no-open"], {
      env: { ...clean, POLAR_VIEWER_TOKEN: "viewer-tok" },
      extendEnv: false,
    });
    expect(JSON.parse(up.stdout)).toEqual({
      url: `${url}/#token=viewer-tok`,
      base: `${url}/`,
      token_from: "POLAR_VIEWER_TOKEN",
      reachable: true,
    });
    const down = await execa(POLAR, ["dashboard", "--no-open"], {
      env: { ...clean, POLAR_URL: "http://127.0.0.1:1" },
      extendEnv: false,
    });
    expect(down.stdout).toBe(`http://127.0.0.1:1/#token=${DEV_TOKENS.trainer}`);
    expect(down.stderr).toContain("nothing answers at http://127.0.0.1:1/");
  });

  it("has --help and exits 2 naming the flag on a bad URL", async () => {
    const help = await execa(POLAR, ["dashboard", "--help"], { env: clean, extendEnv: false });
    expect(help.stdout).toMatch(/--control-plane <url>[\s\S]*--json[\s\S]*--no-open/);
    const bad = await execa(POLAR, ["dashboard", "--control-plane", "nope", "--no-open"], {
      env: clean,
      extendEnv: false,
      reject: false,
    });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain("--control-plane: not a URL");
  });
});
