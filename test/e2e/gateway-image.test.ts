/**
 * The gateway's container image, built with podman from `deploy/gateway/Containerfile` and the
 * packed gateway package, then run the way `deploy/gateway/polar-gateway.service` runs the
 * installed binary: the unit's ExecStart (its `%H` replaced by a node id), User,
 * WorkingDirectory and EnvironmentFile, against a local control plane (`wrangler dev`) and the
 * simulated engine on the host, over the host network. One session of examples/hello/task.yaml
 * (the shell harness runs `node ask.mjs` with the image's node) must complete with a
 * token-exact trajectory.
 *
 * No registry is reachable here, so the Containerfile's default base (the official Node image)
 * is replaced by one built from this host's node, npm and busybox
 * (scripts/build-node-base-image.ts); the recipe itself is the file users build. npm runs inside
 * the build and fetches the package's dependencies, as it would on a user's machine.
 *
 * Also here, without podman: the unit in docs/gateway.md is the file in deploy/, the unit passes
 * `systemd-analyze verify`, and the Apptainer definition follows the same recipe.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SupervisedProcess, startSupervised } from "../../cli/child-process";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { PODMAN_SETTINGS } from "../../gateway-agent/testing/images";
import type { SessionResult } from "../../protocol";
import { ensureNodeBaseImage } from "../../scripts/build-node-base-image";
import { packGateway } from "../support/gateway-package";
import { describeWith, type OptionalTool, runs } from "../support/optional-tools";

const CONTAINERFILE = join(REPO_ROOT, "deploy/gateway/Containerfile");
const UNIT_FILE = join(REPO_ROOT, "deploy/gateway/polar-gateway.service");
const APPTAINER_DEF = join(REPO_ROOT, "deploy/gateway/polar-gateway.def");
const IMAGE = "localhost/polar-gateway:e2e";
const NODE_ID = "image-gw";
const PACKAGE_VERSION = (
  JSON.parse(readFileSync(join(REPO_ROOT, "packages", "polar-gateway", "package.json"), "utf8")) as {
    version: string;
  }
).version;

/** `Key=value` lines of the unit's [Service] section (a key given twice keeps its last value). */
function unitService(text: string): Record<string, string> {
  const section = /^\[Service\]\n([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(text)?.[1] ?? "";
  const out: Record<string, string> = {};
  for (const line of section.split("\n")) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

const podman = (args: string[]) => [...PODMAN_SETTINGS.globalArgs, ...args];
/** The ulimits this kernel needs on every container (RUN steps of a build included). */
const ULIMITS = PODMAN_SETTINGS.createArgs;

/**
 * The flags of the `podman run` in docs/gateway.md that matter to the gateway, which this test
 * runs the image with: the host's network (engine and control plane on loopback) and, because
 * bwrap mounts a fresh /proc for each sandbox and podman masks /proc paths, unmasked system paths.
 */
const DOCUMENTED_RUN_FLAGS = ["--network host", "--security-opt systempaths=unconfined"];

const SYSTEMD_ANALYZE: OptionalTool = {
  name: "systemd-analyze",
  install: "apt-get install systemd",
  probe: () => runs("systemd-analyze", ["--version"]),
};

describe("deploy/gateway: one recipe, one unit", () => {
  const unitText = readFileSync(UNIT_FILE, "utf8");

  it("docs/gateway.md shows the unit file of deploy/ as it is", () => {
    const doc = readFileSync(join(REPO_ROOT, "docs", "gateway.md"), "utf8");
    const blocks = [...doc.matchAll(/```ini\n([\s\S]*?)```/g)].map((m) => m[1]);
    expect(blocks.filter((b) => b?.includes("polar-gateway.service"))).toEqual([unitText]);
  });

  it("docs/gateway.md runs the image with the flags tested here", () => {
    const doc = readFileSync(join(REPO_ROOT, "docs", "gateway.md"), "utf8");
    const run = doc.split("\n").find((l) => l.startsWith("podman run ") && l.includes(" polar-gateway:"));
    for (const f of DOCUMENTED_RUN_FLAGS) expect(run).toContain(` ${f} `);
  });

  it("the Apptainer definition starts from the same Node image and installs and runs the same way", () => {
    const containerfile = readFileSync(CONTAINERFILE, "utf8");
    const def = readFileSync(APPTAINER_DEF, "utf8");
    const base = /^ARG BASE=docker\.io\/library\/(\S+)$/m.exec(containerfile)?.[1];
    expect(base).toMatch(/^node:\d+-/);
    expect(/^From:\s*(\S+)$/m.exec(def)?.[1]).toBe(base);
    // The same npm install line (the Containerfile's continuation lines aside).
    const install = /^RUN (npm install -g [^\\\n]*?)\s*\\?$/m.exec(containerfile)?.[1];
    expect(install).toBeDefined();
    expect(def).toContain(install!);
    const entrypoint = (JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(containerfile)![1]!) as string[])[0];
    expect(entrypoint).toBe(unitService(unitText).ExecStart?.split(" ")[0]);
    expect(/^%runscript\n\s*exec (\S+) "\$@"$/m.exec(def)?.[1]).toBe(entrypoint);
  });
});

describeWith([SYSTEMD_ANALYZE], "systemd-analyze verify", () => {
  it("accepts the unit, with /usr/local/bin/polar executable as npm install -g leaves it", async () => {
    // A scratch root: this host's unit folder (for the targets the unit names) and an executable
    // at ExecStart's path, so verify checks the unit rather than this host's installs.
    const root = mkdtempSync(join(tmpdir(), "polar-unit-root-"));
    try {
      mkdirSync(join(root, "usr/lib"), { recursive: true });
      execFileSync("cp", ["-r", "/usr/lib/systemd", join(root, "usr/lib/")], {
        stdio: "ignore",
      });
      mkdirSync(join(root, "usr/local/bin"), { recursive: true });
      writeFileSync(join(root, "usr/local/bin/polar"), "#!/bin/sh\n", { mode: 0o755 });
      mkdirSync(join(root, "etc/systemd/system"), { recursive: true });
      writeFileSync(join(root, "etc/systemd/system", basename(UNIT_FILE)), readFileSync(UNIT_FILE));
      const r = await execa(
        "systemd-analyze",
        ["verify", `--root=${root}`, `/etc/systemd/system/${basename(UNIT_FILE)}`],
        { reject: false, all: true },
      );
      // Unknown keys and bad values are warnings with exit 0: any output fails too.
      expect({ code: r.exitCode, output: r.all }).toEqual({ code: 0, output: "" });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describeWith(["podman", "bubblewrap"], "the gateway image (podman)", () => {
  let stack: LocalStack;
  let gateway: SupervisedProcess | undefined;
  let scratch: string;
  let buildSeconds = 0;
  let connectSeconds = 0;
  const container = `polar-gateway-e2e-${process.pid}`;

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), "polar-image-e2e-"));
    const build = (async () => {
      const tgz = await packGateway();
      const base = ensureNodeBaseImage();
      // npm in the build trusts what npm on this host trusts (a TLS-inspecting proxy's CA).
      const ca = process.env.NODE_EXTRA_CA_CERTS;
      const caArgs =
        ca && existsSync(ca)
          ? [
              "-v",
              `${ca}:/run/polar-build-ca.pem:ro`,
              "--build-arg",
              "NODE_EXTRA_CA_CERTS=/run/polar-build-ca.pem",
            ]
          : [];
      // The previous build of this tag, removed once replaced (each rebuild would leave one behind).
      const previous = await execa("podman", ["image", "inspect", "--format", "{{.Id}}", IMAGE], {
        reject: false,
      });
      const t0 = performance.now();
      await execa(
        "podman",
        podman([
          "build",
          ...ULIMITS,
          "-f",
          CONTAINERFILE,
          "--build-arg",
          `BASE=${base}`,
          ...caArgs,
          "-t",
          IMAGE,
          dirname(tgz),
        ]),
        { all: true },
      ).catch((err: { all?: string }) => {
        throw new Error(`podman build failed:\n${err.all?.slice(-4000)}`);
      });
      buildSeconds = (performance.now() - t0) / 1000;
      // packGateway's scratch folder (the package copy, its build and the tarball): built in now.
      rmSync(dirname(dirname(tgz)), { recursive: true, force: true });
      const now = (await execa("podman", ["image", "inspect", "--format", "{{.Id}}", IMAGE])).stdout.trim();
      const old = previous.exitCode === 0 ? String(previous.stdout).trim() : "";
      if (old && old !== now) await execa("podman", ["rmi", old], { reject: false });
    })();
    [stack] = await Promise.all([startLocalStack({ gateways: 0 }), build]);
  }, 600_000);

  afterAll(async () => {
    await gateway?.stop();
    await execa("podman", ["rm", "-f", "-t", "5", container], { reject: false });
    await stack?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    console.log(
      `gateway image: podman build ${buildSeconds.toFixed(1)} s, container start to connected ${connectSeconds.toFixed(1)} s`,
    );
  });

  const run = (args: string[]) =>
    execa("podman", podman(["run", "--rm", ...ULIMITS, ...args]), { all: true });

  it("polar --version prints the package's version, as a non-root user", async () => {
    expect((await run([IMAGE, "--version"])).stdout.trim()).toBe(PACKAGE_VERSION);
    expect((await run(["--entrypoint", "id", IMAGE, "-un"])).stdout.trim()).toBe("polar");
  });

  it("the unit's ExecStart, User, WorkingDirectory and EnvironmentFile run a hello session to COMPLETED, in bubblewrap", async () => {
    const unit = unitService(readFileSync(UNIT_FILE, "utf8"));
    const [bin, ...args] = unit.ExecStart!.replaceAll("%H", NODE_ID).split(/\s+/);
    const topologyPath = args[args.indexOf("-c") + 1]!;
    const workDir = unit.WorkingDirectory!;
    // The topology an operator writes for this host: the documented keys, the host's engine.
    const topology = join(scratch, "topology.yaml");
    writeFileSync(
      topology,
      [
        "gateway:",
        // The control plane from the EnvironmentFile, as an operator writes it.
        `  control_plane_url: \${POLAR_URL}`,
        `  work_root: ${workDir}/work`,
        // A session that cannot start its bubblewrap sandbox fails instead of running bare.
        "  runtimes:",
        "    local:",
        "      sandbox: always",
        "  nodes:",
        `    - id: ${NODE_ID}`,
        `      model_served: ${stack.model}`,
        "      inference:",
        "        engine: sglang",
        `        base_url: ${stack.engineUrl}`,
        "",
      ].join("\n"),
    );
    const envFile = join(scratch, "gateway.env");
    writeFileSync(
      envFile,
      `POLAR_URL=${stack.controlPlane.url}\nPOLAR_GATEWAY_TOKEN=${stack.tokens.gateway}\n`,
      { mode: 0o600 },
    );
    const t0 = performance.now();
    gateway = startSupervised("gateway container", "podman", [
      ...podman(["run", "--rm", "--name", container, ...ULIMITS]),
      ...DOCUMENTED_RUN_FLAGS.flatMap((f) => f.split(" ")),
      ...(await bwrapMounts()),
      "--user",
      unit.User!,
      "--workdir",
      workDir,
      "--env-file",
      envFile,
      "-v",
      `${topology}:${topologyPath}:ro`,
      // The task's upload_file source, relative to the gateway's working directory.
      "-v",
      `${join(REPO_ROOT, "examples", "hello")}:${workDir}/examples/hello:ro`,
      "--entrypoint",
      bin!,
      IMAGE,
      ...args,
    ]);
    await waitForGateway(stack, gateway);
    connectSeconds = (performance.now() - t0) / 1000;

    const batch = loadTaskFile(join(REPO_ROOT, "examples/hello/task.yaml"));
    batch.tasks = batch.tasks.map((t) => ({ ...t, num_samples: 1 }));
    const { batch_id } = await stack.client.submit(batch);
    const results: SessionResult[] = [];
    for await (const { result } of stack.client.streamResults(batch_id, { timeoutMs: 120_000 }))
      results.push(result);
    expect(results.map((r) => [r.status, r.reward, r.error])).toEqual([["COMPLETED", 1, null]]);
    // ask.mjs asks twice; token mode makes one chain whose ids and logprobs line up.
    const traces = results[0]!.trajectory.traces;
    expect(traces.length).toBeGreaterThan(0);
    for (const t of traces) {
      expect(t.response_ids.length).toBeGreaterThan(0);
      expect(t.response_logprobs?.length).toBe(t.response_ids.length);
    }
    expect(gateway.output()).toContain(`"node_id":"${NODE_ID}"`);
  });
});

/**
 * `-v` flags that show this host's bubblewrap (Debian 12's, what `apt-get install bubblewrap`
 * puts into the default Debian-based image) in the gateway image: the binary and each library
 * it links that the image lacks. The base built here has no apt to install it with.
 */
async function bwrapMounts(): Promise<string[]> {
  const bwrap = (await execa("bash", ["-c", "command -v bwrap"])).stdout.trim();
  const libs = [...(await execa("ldd", [bwrap])).stdout.matchAll(/=> (\/\S+) \(0x/g)].map((m) => m[1]!);
  const missing = await execa(
    "podman",
    podman([
      "run",
      "--rm",
      ...ULIMITS,
      "--entrypoint",
      "sh",
      IMAGE,
      "-c",
      'for f; do [ -e "$f" ] || echo "$f"; done',
      "-",
      ...libs,
    ]),
  );
  return [bwrap, ...missing.stdout.split("\n").filter(Boolean)].flatMap((f) => ["-v", `${f}:${f}:ro`]);
}

/** Waits until the control plane lists the container's gateway as connected. */
async function waitForGateway(stack: LocalStack, gateway: SupervisedProcess): Promise<void> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const res = await fetch(`${stack.controlPlane.url}/v1/gateways`, {
      headers: { authorization: `Bearer ${stack.tokens.trainer}` },
    });
    const body = (await res.json()) as { gateways?: Array<{ node_id: string; connected: boolean }> };
    if (body.gateways?.some((g) => g.node_id === NODE_ID && g.connected)) return;
    if (!gateway.alive() || Date.now() > deadline)
      throw new Error(
        `the gateway container ${gateway.alive() ? "did not connect in 90 s" : "exited"}:\n${gateway.output().slice(-4000)}`,
      );
    await new Promise((r) => setTimeout(r, 250));
  }
}
