/**
 * The control-plane package, the TypeScript client and the Python wheels as a user gets them: each
 * built from this checkout, packed (`npm pack`, `pip wheel`) and installed outside the repository,
 * then run from an empty folder with the repository's tools off PATH.
 *
 * - `npm install -g` of the gateway and control-plane tarballs into one prefix (as on an
 *   operator's machine): `polar-control-plane deploy --dry-run` bundles the packaged Worker with
 *   every binding of wrangler.toml and no login; bad input stops before wrangler with the flag
 *   named; the gateway CLI's `polar deploy --dry-run` hands over to the package beside it.
 * - `polar-control-plane dev` runs the packaged Worker (its Durable Objects migrate, the dashboard
 *   is served), and the client installed from its tarball into an empty project talks to it from
 *   plain Node (ESM); its declarations type-check a consumer and reject an unknown route.
 * - `pip wheel` of polar-trainer and polar-reference-engine with no index and no build isolation;
 *   both wheels installed into a fresh venv (no dependencies): polar_trainer imports from there
 *   (standard library only; it has no command line), `python -m polar_reference_engine --help` runs.
 *
 * One pack and one install per package for the file (a `beforeAll`), one `dev` session.
 */
import { execFile, spawn } from "node:child_process";
import {
  cpSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { parse as parseToml } from "smol-toml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../cli/ports";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import {
  buildControlPlanePackage,
  CONTROL_PLANE_PACKAGE_DIR,
} from "../../scripts/build-control-plane-package";
import { packGateway } from "../support/gateway-package";
import { describeWith, probe, pythonModule } from "../support/optional-tools";

const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), "polar-packages-"));
/** The global prefix of both npm tarballs, the empty project the client goes into, the user's folder. */
const prefix = join(work, "prefix");
const project = join(work, "project");
const user = join(work, "user");
const CLIENT_DIR = join(REPO_ROOT, "clients", "typescript");

/** PATH without the repository's (or any) node_modules/.bin: what the installed commands find is theirs. */
const PATH = [
  join(prefix, "bin"),
  ...(process.env.PATH ?? "").split(delimiter).filter((p) => !p.includes("node_modules")),
].join(delimiter);
const ENV = { PATH, HOME: process.env.HOME ?? "", NO_COLOR: "1", CI: "true", WRANGLER_SEND_METRICS: "false" };

/** A command of the installed packages, from the empty folder; resolves to its exit code and output. */
async function installed(cmd: string, args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await run(join(prefix, "bin", cmd), args, {
      cwd: user,
      env: ENV,
      maxBuffer: 16 * 1024 * 1024,
      timeout: 120_000,
    });
    return { code: 0, out: stdout + stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof err.code === "number" ? err.code : -1,
      out: `${err.stdout ?? ""}${err.stderr ?? ""}`,
    };
  }
}

/** `npm pack` of `dir` into `out`; the tarball's path. */
async function pack(dir: string, out: string): Promise<string> {
  mkdirSync(out, { recursive: true });
  const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", out], { cwd: dir });
  return join(out, stdout.trim().split("\n").pop()!);
}

/** The control-plane package built into a scratch copy (never the repository's dist/) and packed. */
async function packControlPlane(): Promise<string> {
  const dir = join(work, "control-plane-src");
  cpSync(CONTROL_PLANE_PACKAGE_DIR, dir, {
    recursive: true,
    filter: (src) => !src.startsWith(join(CONTROL_PLANE_PACKAGE_DIR, "dist")),
  });
  await buildControlPlanePackage(dir);
  return pack(dir, join(work, "tgz"));
}

/**
 * The client packed as `npm pack` in clients/typescript does (its `prepack` builds dist/), from a
 * scratch copy whose node_modules is the repository's, so tsc and openapi-fetch's types resolve.
 */
async function packClient(): Promise<string> {
  const dir = join(work, "client-src");
  mkdirSync(dir);
  for (const f of ["package.json", "README.md", "CHANGELOG.md", "tsconfig.json", "openapi.json", "src"])
    cpSync(join(CLIENT_DIR, f), join(dir, f), { recursive: true, filter: (s) => !s.endsWith(".test.ts") });
  symlinkSync(join(REPO_ROOT, "node_modules"), join(dir, "node_modules"));
  return pack(dir, join(work, "tgz"));
}

/** Bytes under `path`, symlinks not followed (node_modules/.bin links to the binaries it counts). */
function du(path: string): number {
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (!st?.isDirectory()) return st?.size ?? 0;
  return readdirSync(path).reduce((sum, name) => sum + du(join(path, name)), 0);
}
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

const npmInstall = (args: string[], cwd: string) =>
  run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", ...args], {
    cwd,
    maxBuffer: 16 * 1024 * 1024,
  });

/** `pip wheel --no-build-isolation` builds with the setuptools installed (Debian's python3-pip brings it). */
const SETUPTOOLS = pythonModule(
  "setuptools",
  "setuptools",
  "apt-get install python3-pip (it depends on python3-setuptools)",
);
/** Python with the machine's configuration but no user site-packages (what a fresh venv sees). */
const PY_ENV = {
  PATH,
  HOME: process.env.HOME ?? "",
  PIP_DISABLE_PIP_VERSION_CHECK: "1",
  PYTHONNOUSERSITE: "1",
};

/**
 * Both wheels built with no index (one pip run), the engine's listing, then both installed with no
 * dependencies into a fresh venv and run from there: polar_trainer needs only the standard library
 * (and has no command line); the engine's `--help` needs no torch.
 */
async function pythonPackages() {
  const out = join(work, "wheels");
  const srcs = ["python", "reference-engine"].map((name) => {
    // A copy: setuptools writes build/ and *.egg-info beside the sources.
    const src = join(work, `py-${name}`);
    cpSync(join(REPO_ROOT, "clients", name), src, {
      recursive: true,
      filter: (s) => !/(__pycache__|\.egg-info|[/\\]build|[/\\]tests)$/.test(s),
    });
    return src;
  });
  const opts = { cwd: work, env: PY_ENV };
  await run(
    "python3",
    ["-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", out, ...srcs],
    opts,
  );
  const wheels = readdirSync(out).sort();
  const venv = join(work, "venv");
  const py = join(venv, "bin", "python");
  const [listing] = await Promise.all([
    run("python3", ["-m", "zipfile", "-l", join(out, wheels[0] ?? "none")], opts),
    run("python3", ["-m", "venv", "--without-pip", venv], opts),
  ]);
  await run(
    "python3",
    [
      "-m",
      "pip",
      "--python",
      py,
      "install",
      "-q",
      "--no-deps",
      "--no-index",
      ...wheels.map((w) => join(out, w)),
    ],
    opts,
  );
  const probe =
    "import polar_trainer, polar_trainer.scheduler, polar_trainer.slime.rollout; print(polar_trainer.__file__); print(polar_trainer.__version__)";
  const [imported, help] = await Promise.all([
    run(py, ["-I", "-c", probe], { cwd: user, env: PY_ENV }),
    run(py, ["-I", "-m", "polar_reference_engine", "--help"], { cwd: user, env: PY_ENV }),
  ]);
  const [file = "", version = ""] = imported.stdout.trim().split("\n");
  return { wheels, engineFiles: listing.stdout, file, version, help: help.stdout };
}
/** Started with the npm work (it needs no network); awaited by the Python test. */
let python: Promise<Awaited<ReturnType<typeof pythonPackages>>> | undefined;

const tarballs = { gateway: "", controlPlane: "", client: "" };

beforeAll(async () => {
  for (const d of [prefix, project, user]) mkdirSync(d);
  if ((["python3", "pip", SETUPTOOLS] as const).every((t) => probe(t) === null)) {
    python = pythonPackages();
    python.catch(() => {}); // reported by the Python test, which awaits it
  }
  const t0 = performance.now();
  [tarballs.gateway, tarballs.controlPlane, tarballs.client] = await Promise.all([
    packGateway(),
    packControlPlane(),
    packClient(),
  ]);
  const t1 = performance.now();
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "probe", private: true, type: "module" }),
  );
  await Promise.all([
    npmInstall(["-g", "--prefix", prefix, tarballs.gateway, tarballs.controlPlane], prefix),
    npmInstall([tarballs.client], project),
  ]);
  const t2 = performance.now();
  const cp = join(prefix, "lib", "node_modules", "@polar-ts", "control-plane");
  console.log(
    `packed in ${((t1 - t0) / 1000).toFixed(1)} s, installed in ${((t2 - t1) / 1000).toFixed(1)} s; ` +
      `control plane: tarball ${mb(du(tarballs.controlPlane))}, installed ${mb(du(cp))} ` +
      `(wrangler and its tree ${mb(du(join(cp, "node_modules")))}); ` +
      `client: tarball ${(du(tarballs.client) / 1e3).toFixed(0)} kB, installed with its dependencies ${mb(du(join(project, "node_modules")))}`,
  );
}, 300_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the control-plane package, installed with npm install -g", () => {
  it("deploy --dry-run bundles the packaged Worker with every binding of wrangler.toml, no login, nothing left in the folder", async () => {
    const r = await installed("polar-control-plane", ["deploy", "--dry-run"]);
    expect(r.code, r.out).toBe(0);
    const toml = parseToml(await readFile(join(REPO_ROOT, "wrangler.toml"), "utf8")) as {
      durable_objects: { bindings: Array<{ name: string; class_name: string }> };
      r2_buckets: Array<{ binding: string; bucket_name: string }>;
    };
    for (const b of toml.durable_objects.bindings) expect(r.out).toContain(`env.${b.name} (${b.class_name})`);
    for (const b of toml.r2_buckets) expect(r.out).toContain(`env.${b.binding} (${b.bucket_name})`);
    // The dashboard's files come from the installed package, and wrangler stopped before uploading.
    expect(r.out).toMatch(
      /Read \d+ files from the assets directory .*@polar-ts\/control-plane\/dist\/assets/,
    );
    expect(r.out).toContain("--dry-run: exiting now.");
    expect(r.out).toContain("polar-control-plane wrangler secret put POLAR_ROLE_TOKEN");
    expect(readdirSync(user)).toEqual([]);
  });

  it("bad input stops before wrangler runs, naming the flag", async () => {
    const name = await installed("polar-control-plane", ["deploy", "--dry-run", "--name", "Polar_TS"]);
    expect(name.code).toBe(2);
    expect(name.out).toContain("deploy: --name 'Polar_TS' is not a Worker name");
    const flag = await installed("polar-control-plane", ["deploy", "--dryrun"]);
    expect(flag.code).toBe(2);
    expect(flag.out).toContain("deploy: Unknown option '--dryrun'");
    for (const r of [name, flag]) expect(r.out).not.toContain("wrangler 4.");
  });

  it("polar deploy --dry-run of the gateway CLI installed beside it hands over to polar-control-plane", async () => {
    const r = await installed("polar", ["deploy", "--dry-run"]);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain("--dry-run: exiting now.");
    expect(r.out).toContain("Bundle OK (dry run, nothing deployed).");
  });
});

describe("polar-control-plane dev and the client package", () => {
  let dev: ReturnType<typeof spawn> | undefined;
  let url = "";
  let log = "";
  const tokens = { trainer: "t-packaged", gateway: "g-packaged", admin: "a-packaged" };

  beforeAll(async () => {
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    const vars = Object.entries(tokens).flatMap(([role, t]) => [
      "--var",
      `POLAR_${role.toUpperCase()}_TOKEN:${t}`,
    ]);
    dev = spawn(
      join(prefix, "bin", "polar-control-plane"),
      ["dev", "--port", String(port), "--", "--ip", "127.0.0.1", ...vars],
      {
        cwd: user,
        env: ENV,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    for (const s of [dev.stdout!, dev.stderr!]) s.on("data", (d: Buffer) => (log += d.toString()));
    const deadline = Date.now() + 60_000;
    for (;;) {
      const ok = await fetch(`${url}/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline || dev.exitCode !== null)
        throw new Error(`polar-control-plane dev did not start:\n${log}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }, 90_000);

  afterAll(async () => {
    if (!dev || dev.exitCode !== null) return;
    const exited = new Promise((r) => dev!.once("exit", r));
    dev.kill("SIGTERM");
    await exited;
  });

  it("serves the dashboard and the API from the packaged Worker, its Durable Objects migrating on first use", async () => {
    const page = await fetch(`${url}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<!doctype html>");
    // A batch goes through BatchDO and QueueDO: both create their tables (drizzle) on this request.
    const created = await fetch(`${url}/v1/batches`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.trainer}`, "content-type": "application/json" },
      body: JSON.stringify({
        tasks: [
          { task_id: "t", instruction: "hi", agent: { harness: "shell", custom_shell: { command: "true" } } },
        ],
      }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    expect(((await created.json()) as { batch_id?: string }).batch_id).toMatch(/\S/);
    // State lives where `dev` says, in the user's folder.
    expect(readdirSync(user)).toEqual([".polar-control-plane"]);
  });

  it("the client, installed from its tarball into an empty project, works from plain Node ESM", async () => {
    const script = `
      import { createPolarClient, PolarApiError, unwrap } from "@polar-ts/client";
      const polar = createPolarClient({ baseUrl: ${JSON.stringify(`${url}/`)}, token: ${JSON.stringify(tokens.trainer)} });
      const { batches } = await unwrap(polar.api.GET("/v1/batches", {}));
      const denied = await unwrap(createPolarClient({ baseUrl: polar.baseUrl, token: "wrong" }).api.GET("/v1/batches", {})).catch((e) => e);
      console.log(JSON.stringify({ batches: batches.length, denied: denied instanceof PolarApiError ? denied.status : String(denied) }));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], {
      cwd: project,
      env: ENV,
    });
    expect(JSON.parse(stdout)).toEqual({ batches: 1, denied: 401 });
  });

  it("its declarations type-check a consumer and reject a route the API does not have", async () => {
    writeFileSync(
      join(project, "check.ts"),
      [
        'import { createPolarClient, unwrap, type ResponseOf } from "@polar-ts/client";',
        'const polar = createPolarClient({ baseUrl: "http://127.0.0.1:8787", token: "t" });',
        'export const list: Promise<ResponseOf<"listBatches">> = unwrap(polar.api.GET("/v1/batches", {}));',
        "export const count = async (): Promise<number> => (await list).batches.length;",
        "// @ts-expect-error: not a path of the API (the types are the document's, not any)",
        'export const nope = polar.api.GET("/v1/no-such-route", {});',
        "",
      ].join("\n"),
    );
    // The README's example, as a user pastes it (its `task` and Node's `process` declared).
    const readme = await readFile(join(CLIENT_DIR, "README.md"), "utf8");
    const example = /## Use\n[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    expect(example).toContain('from "@polar-ts/client"');
    writeFileSync(
      join(project, "readme-example.ts"),
      [
        'import type { RequestOf } from "@polar-ts/client";',
        'declare const task: RequestOf<"createBatch">["tasks"][number];',
        "declare const process: { env: Record<string, string | undefined> };",
        example,
        "export {};",
      ].join("\n"),
    );
    const tsc = join(REPO_ROOT, "node_modules", "typescript", "bin", "tsc");
    const args = [
      "--noEmit",
      "--skipLibCheck",
      "--strict",
      "--module",
      "nodenext",
      "--moduleResolution",
      "nodenext",
    ];
    const r = await run(
      process.execPath,
      [tsc, ...args, "--target", "es2022", "--lib", "es2023,dom", "check.ts", "readme-example.ts"],
      {
        cwd: project,
      },
    ).catch((e: { stdout?: string }) => ({ stdout: `FAILED ${e.stdout}` }));
    expect(r.stdout).toBe("");
  });
});

describeWith(["python3", "pip", SETUPTOOLS], "the Python wheels", () => {
  it("pip wheel builds polar-trainer and polar-reference-engine with no index; both install into a fresh venv and run from there", async () => {
    const r = await python!;
    expect(r.wheels).toEqual([
      "polar_reference_engine-0.1.0-py3-none-any.whl",
      "polar_trainer-0.1.0-py3-none-any.whl",
    ]);
    // The engine's wheel carries the generated /generate contract it loads at run time.
    expect(r.engineFiles).toContain("polar_reference_engine/sglang_contract.json");
    expect(r.file.startsWith(join(work, "venv", "lib"))).toBe(true);
    expect(r.version).toBe("0.1.0");
    expect(r.help).toMatch(/\{serve,init\}/);
  });
});
