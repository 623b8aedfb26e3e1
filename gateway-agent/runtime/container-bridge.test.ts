import { execFileSync, spawn } from "node:child_process";
import { realpathSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink } from "node:fs/promises";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { RuntimeSpec } from "../../protocol";
import { describeWith, itWith, type Need } from "../../test/support/optional-tools";
import type { FakeControlPlane } from "../testing/fake-control-plane";
import { type GatewayRig, startGatewayRig } from "../testing/gateway-rig";
import { ensureTestImage, PODMAN_SETTINGS } from "../testing/images";
import { isResultOf, makeAssign } from "../testing/session-fixtures";
import { FORWARDERS_DIR, forwarderScript, startContainerBridge } from "./container-bridge";
import { DockerRuntime, dockerCreateArgs } from "./docker";
import { DEFAULT_RUNTIME_SETTINGS, type RuntimeContext } from "./types";

/** The host's real python3 binary (not a version-manager shim), or null. */
function hostPython(): string | null {
  try {
    return execFileSync("python3", ["-c", "import os, sys; print(os.path.realpath(sys.executable))"])
      .toString()
      .trim();
  } catch {
    return null;
  }
}
/** The install prefix of that python3 (mounted at the same path so it finds its stdlib). */
function hostPythonPrefix(): string {
  return execFileSync("python3", ["-c", "import sys; print(sys.base_prefix)"]).toString().trim();
}
const PYTHON = hostPython();
/** The host's socat, or null. */
function hostSocat(): string | null {
  try {
    return execFileSync("bash", ["-c", "command -v socat"]).toString().trim() || null;
  } catch {
    return null;
  }
}
const SOCAT = hostSocat();

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

let proxy: http.Server;
let proxyUrl: string;
beforeEach(async () => {
  // Stands in for the recording proxy: answers with the path it was asked for.
  proxy = http.createServer((req, res) => res.end(`proxy-reached ${req.url}`));
  await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
afterEach(async () => {
  proxy.closeAllConnections();
  await new Promise<void>((r) => proxy.close(() => r()));
});

describe("forwarder scripts on the host (TCP loopback → proxy socket)", () => {
  const cases: [string, string | null, string, Need[]][] = [
    ["node", process.execPath, "forward.cjs", []],
    ["python3", PYTHON, "forward.py", ["python3"]],
  ];
  for (const [name, interpreter, script, needs] of cases) {
    itWith(needs, `${name}: relays requests and says it is ready`, async () => {
      const bridge = await startContainerBridge(proxyUrl);
      const port = await freePort();
      const child = spawn(
        interpreter as string,
        [path.join(FORWARDERS_DIR, script), path.join(bridge.hostDir, "proxy.sock"), String(port)],
        {
          stdio: ["ignore", "pipe", "inherit"],
        },
      );
      try {
        await new Promise<void>((resolve, reject) => {
          child.stdout.on("data", (d: Buffer) => d.toString().includes(`ready ${name}`) && resolve());
          child.on("exit", (code) => reject(new Error(`forwarder exited with ${code}`)));
        });
        const answers = await Promise.all(
          [1, 2, 3].map((i) => fetch(`http://127.0.0.1:${port}/v1/n${i}`).then((r) => r.text())),
        );
        expect(answers).toEqual(["proxy-reached /v1/n1", "proxy-reached /v1/n2", "proxy-reached /v1/n3"]);
        // SIGTERM ends it at once (it runs as PID 1, which ignores SIGTERM without a handler).
        const exited = new Promise((r) => child.on("exit", r));
        child.kill("SIGTERM");
        await exited;
      } finally {
        child.kill("SIGKILL");
        await bridge.close();
      }
    });
  }

  it("refuses a proxy that is not on loopback (the harness URL would not work inside)", async () => {
    await expect(startContainerBridge("http://10.0.0.5:8000")).rejects.toThrow(/127\.0\.0\.1/);
  });

  it("create args: no network, socket folder and scripts read-only, the forwarder as PID 1", () => {
    const spec = RuntimeSpec.parse({ backend: "docker", image: "img:1", allow_internet: false });
    const args = dockerCreateArgs(spec, {
      name: "c",
      hostDir: "/h",
      labels: {},
      createArgs: [],
      forwarder: { hostDir: "/tmp/polar-ctr-x", port: 41000 },
    });
    expect(args).toEqual([
      "create",
      "--name",
      "c",
      "-v",
      "/h:/polar/session",
      "--network",
      "none",
      "-v",
      "/tmp/polar-ctr-x:/polar/proxy:ro",
      "-v",
      `${FORWARDERS_DIR}:/polar/forwarders:ro`,
      "img:1",
      "sh",
      "-c",
      forwarderScript(41000),
    ]);
    // The probe order is node, python3, socat.
    const script = forwarderScript(41000);
    expect(script.indexOf("command -v node")).toBeLessThan(script.indexOf("command -v python3"));
    expect(script.indexOf("command -v python3")).toBeLessThan(script.indexOf("command -v socat"));
  });
});

describeWith(["podman"], "podman containers without internet", { timeout: 180_000 }, () => {
  let image: string;
  let scratch: string;
  let pyDir: string;
  let nodeDir: string;
  let socatDir: string;
  let other: http.Server;
  let otherPort: number;
  beforeAll(async () => {
    image = ensureTestImage();
    scratch = await mkdtemp(path.join(tmpdir(), "polar-ctr-test-"));
    // Folders holding only one interpreter each, so the probe order can be steered by PATH.
    pyDir = path.join(scratch, "py");
    nodeDir = path.join(scratch, "node");
    socatDir = path.join(scratch, "socat");
    execFileSync("mkdir", ["-p", pyDir, nodeDir, socatDir]);
    if (SOCAT) await symlink(realpathSync(SOCAT), path.join(socatDir, "socat"));
    if (PYTHON) await symlink(PYTHON, path.join(pyDir, "python3"));
    await symlink(realpathSync(process.execPath), path.join(nodeDir, "node"));
    // A service on the host's loopback: a container with no network must not reach it.
    other = http.createServer((_req, res) => res.end("host-service"));
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    otherPort = (other.address() as AddressInfo).port;
  });
  afterAll(async () => {
    other?.closeAllConnections();
    await new Promise<void>((r) => (other ? other.close(() => r()) : r()));
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  const ctx = (name: string): RuntimeContext => ({
    workRoot: scratch,
    name,
    session_id: name,
    node_id: "n",
    proxyUrl,
    settings: { ...DEFAULT_RUNTIME_SETTINGS, docker: PODMAN_SETTINGS },
    warn() {},
  });
  /** The host's /usr (libraries) and an interpreter folder mounted read-only. */
  const offline = (binDir: string | null, extra: string[] = []) =>
    RuntimeSpec.parse({
      backend: "docker",
      image,
      allow_internet: false,
      kwargs: { shell: "sh" },
      env: { PATH: binDir ? "/polar-bin:/bin" : "/bin" },
      volumes: binDir ? ["/usr:/usr:ro", `${binDir}:/polar-bin:ro`, ...extra] : [],
    });
  /**
   * One GET printed as its body or `FAIL <url>`, with the interpreter itself (busybox's static
   * wget crashes when the host's /usr with its NSS libraries is mounted over the image's).
   */
  const probes: Record<string, (url: string) => string> = {
    node: (url) =>
      `node -e 'fetch(process.argv[1],{signal:AbortSignal.timeout(5000)}).then(r=>r.text()).then(t=>console.log(t),()=>console.log("FAIL "+process.argv[1]))' ${url}`,
    // socat has no HTTP client: the host's node, mounted off the PATH, asks.
    socat: (url) =>
      `/polar-node/node -e 'fetch(process.argv[1],{signal:AbortSignal.timeout(5000)}).then(r=>r.text()).then(t=>console.log(t),()=>console.log("FAIL "+process.argv[1]))' ${url}`,
    python3: (url) =>
      `python3 -c 'import sys, urllib.request as u\ntry: print(u.urlopen(sys.argv[1], timeout=5).read().decode())\nexcept Exception: print("FAIL " + sys.argv[1])' ${url}`,
  };

  async function check(binDir: string, extra: string[], forwarder: string) {
    const rt = await DockerRuntime.create(offline(binDir, extra), ctx(`offline-${forwarder}`));
    const probe = probes[forwarder] as (url: string) => string;
    try {
      await rt.start();
      expect(rt.forwarder).toBe(forwarder);
      const r = await rt.exec(
        [
          probe(`${proxyUrl}/v1/models`),
          probe(`http://127.0.0.1:${otherPort}/`),
          // TEST-NET-1: never routed; with no network the connect fails at once.
          probe("http://192.0.2.1/"),
        ].join("; "),
        { env: {}, logName: "net", capture: true },
      );
      expect((r.stdout ?? "").trim().split("\n")).toEqual([
        "proxy-reached /v1/models",
        `FAIL http://127.0.0.1:${otherPort}/`,
        "FAIL http://192.0.2.1/",
      ]);
      // `kill -9 -1` (how a harness is stopped) spares PID 1: the forwarder keeps serving.
      await rt.exec("kill -9 -1", { env: {}, logName: "kill" });
      const again = await rt.exec(probe(`${proxyUrl}/again`), { env: {}, logName: "again", capture: true });
      expect(again.stdout?.trim()).toBe("proxy-reached /again");
    } finally {
      await rt.teardown({ keep: false });
    }
  }

  it("node in the image: the proxy answers through the forwarder, nothing else is reachable", async () => {
    await check(nodeDir, [], "node");
  });

  itWith(["python3"], "python3 in the image (no node): the same through the Python forwarder", async () => {
    const prefix = hostPythonPrefix();
    await check(
      pyDir,
      prefix.startsWith("/usr/") || prefix === "/usr" ? [] : [`${prefix}:${prefix}:ro`],
      "python3",
    );
  });

  itWith(["socat"], "socat in the image (no node, no python3): the same through socat", async () => {
    await check(socatDir, [`${nodeDir}:/polar-node:ro`], "socat");
  });

  it("an image without node, python3 or socat fails INIT with an infra error saying what to install", async () => {
    const rt = await DockerRuntime.create(offline(null), ctx("offline-none"));
    try {
      await expect(rt.start()).rejects.toMatchObject({
        kind: "infra",
        message: expect.stringMatching(
          /has none of node, python3, socat.*Install one of them.*allow_internet: true/,
        ),
      });
    } finally {
      await rt.teardown({ keep: false });
    }
  });
});

const TOKEN = "offline-test-token";
/** One chat call through the proxy (exit 0 on a 200). */
const ASK_PY = [
  "import json, os, urllib.request as u",
  "body = json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'fix add'}]}).encode()",
  "req = u.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', data=body, headers={'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY'], 'Content-Type': 'application/json'})",
  "print(json.loads(u.urlopen(req, timeout=30).read())['choices'][0]['message']['content'])",
].join("\n");
/** Exit 0 iff the URL in argv[1] answers (the harness treats that as an escape). */
const REACH_PY = "import sys, urllib.request as u\nu.urlopen(sys.argv[1], timeout=5)";

describeWith(["podman", "python3"], "podman session without internet", { timeout: 180_000 }, () => {
  let rig: GatewayRig;
  let cp: FakeControlPlane;
  let scratch: string;
  let image: string;
  let other: http.Server;
  let otherPort: number;

  beforeAll(async () => {
    image = ensureTestImage();
    scratch = await mkdtemp(path.join(tmpdir(), "polar-ctr-gw-test-"));
    // Its own folder (0755): a root gateway maps the container's root to an unprivileged host
    // uid, which cannot enter the 0700 scratch folder.
    await mkdir(path.join(scratch, "bin"), { mode: 0o755 });
    await symlink(PYTHON as string, path.join(scratch, "bin", "python3"));
    other = http.createServer((_req, res) => res.end("host-service"));
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    otherPort = (other.address() as AddressInfo).port;
    rig = await startGatewayRig({
      nodeId: "offline-node",
      token: TOKEN,
      scratch,
      gateway: { runtimeSettings: { docker: PODMAN_SETTINGS } },
    });
    ({ cp } = rig);
  });
  afterAll(async () => {
    await rig?.stop();
    other?.closeAllConnections();
    await new Promise<void>((r) => (other ? other.close(() => r()) : r()));
  });

  const task = (allowInternet: boolean) => {
    const prefix = hostPythonPrefix();
    return makeAssign({
      prefix: allowInternet ? "online" : "offline",
      command: "",
      agent: {
        harness: "shell",
        custom_shell: {
          // Ask the model, then make sure neither the host's loopback nor the outside answers.
          command: `python3 -c "$ASK_PY" && ! python3 -c "$REACH_PY" http://127.0.0.1:${otherPort}/ && ! python3 -c "$REACH_PY" http://192.0.2.1/`,
          env: { ASK_PY, REACH_PY },
        },
      },
      runtime: {
        backend: "docker",
        image,
        allow_internet: allowInternet,
        kwargs: { shell: "sh" },
        env: { PATH: "/polar-bin:/bin" },
        volumes: [
          "/usr:/usr:ro",
          `${path.join(scratch, "bin")}:/polar-bin:ro`,
          ...(prefix === "/usr" || prefix.startsWith("/usr/") ? [] : [`${prefix}:${prefix}:ro`]),
        ],
      },
    });
  };

  it("the harness reaches the proxy through the forwarder (completion recorded), and nothing else", async () => {
    const offline = task(false);
    cp.send(offline);
    const r = (await cp.waitFor(isResultOf(offline.lease_id), 150_000)).result;
    expect(r.error).toBeNull();
    expect(r.status).toBe("COMPLETED");
    expect(r.trajectory.traces).toHaveLength(1);
    // Control: with internet (host network) the host's service answers, so the same harness fails.
    const online = task(true);
    cp.send(online);
    const o = (await cp.waitFor(isResultOf(online.lease_id), 150_000)).result;
    expect(o.status).toBe("ERROR");
    // It did ask the model (so the failure is the host's service answering, not the proxy call).
    expect(o.trajectory.traces).toHaveLength(1);
    expect(o.error?.message).toMatch(/exited with code 1/);
  });
});
