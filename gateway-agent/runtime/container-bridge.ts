/**
 * The proxy inside a container that has no network (`--network none`, i.e. `allow_internet:
 * false`): the gateway serves the proxy on a Unix socket in a private host folder, bind-mounts
 * that folder and its forwarder scripts (read-only) into the container, and the container's PID 1
 * is a forwarder that listens on 127.0.0.1:<proxy port> inside the container's own loopback and
 * relays to the socket. The harness's base URLs (`http://127.0.0.1:<port>`) work unchanged.
 *
 * The forwarder is whichever of `node`, `python3`, `socat` the image has (probed in that order by
 * `command -v` inside the container); an image with none fails INIT with an infra error that says
 * what to install. Being PID 1 also keeps it alive through `kill -9 -1`, which the docker runtime
 * uses to stop a harness (that spares PID 1).
 *
 * @module
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { SessionFailure } from "../errors";
import { startProxyBridge } from "./proxy-bridge";

/** Where the folder holding the proxy socket appears inside the container (read-only). */
export const CONTAINER_PROXY_DIR = "/polar/proxy";
/** Where the gateway's forwarder scripts appear inside the container (read-only). */
export const CONTAINER_FORWARDERS_DIR = "/polar/forwarders";
/** The gateway's own forwarder scripts (`forward.cjs`, `forward.py`). */
export const FORWARDERS_DIR = fileURLToPath(new URL("./forwarders", import.meta.url));
/** Longest wait for the forwarder to listen (an interpreter's cold start on a loaded host). */
export const FORWARDER_READY_TIMEOUT_MS = 60_000;
/** The forwarders tried, in order. */
export const FORWARDER_CANDIDATES = ["node", "python3", "socat"] as const;

const SOCKET_NAME = "proxy.sock";
const MISSING = "polar-forward: missing";
const READY = "polar-forward: ready";

/** A host-side bridge for one container. */
export interface ContainerBridge {
  /** Host folder holding the socket (bind-mounted at {@link CONTAINER_PROXY_DIR}). */
  hostDir: string;
  /** The proxy's port, which the forwarder listens on inside the container. */
  port: number;
  close(): Promise<void>;
}

/**
 * Starts the host side: a Unix socket in a fresh private folder, piped to the proxy.
 *
 * @example
 * ```ts
 * const bridge = await startContainerBridge("http://127.0.0.1:41000");
 * // docker create … ...forwarderCreateArgs(bridge) … image sh -c forwarderScript(bridge.port)
 * await bridge.close();
 * ```
 */
export async function startContainerBridge(proxyUrl: string): Promise<ContainerBridge> {
  const url = new URL(proxyUrl);
  // The harness keeps the proxy URL as is; inside the container only its loopback answers.
  if (!["127.0.0.1", "localhost"].includes(url.hostname) || !url.port) {
    throw new SessionFailure(
      "infra",
      `runtime: allow_internet=false in a container needs the proxy on 127.0.0.1:<port>, got '${proxyUrl}'`,
    );
  }
  // Short path: Unix socket paths are limited to ~108 bytes.
  const hostDir = await mkdtemp(path.join(tmpdir(), "polar-ctr-"));
  try {
    const bridge = await startProxyBridge(proxyUrl, path.join(hostDir, SOCKET_NAME));
    // The image's user may not be root (or root may be mapped in a rootless CLI): let any
    // user in the container traverse the folder and connect (connect needs write on the socket).
    await chmod(hostDir, 0o755);
    await chmod(bridge.socketPath, 0o666);
    return {
      hostDir,
      port: Number(url.port),
      close: async () => {
        await bridge.close();
        await rm(hostDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(hostDir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * The `create` flags of the bridge: the socket folder and the forwarder scripts, both read-only
 * (connecting to a socket needs no write access to its file system).
 *
 * @example
 * ```ts
 * forwarderCreateArgs({ hostDir: "/tmp/polar-ctr-x" }); // ["-v", "/tmp/polar-ctr-x:/polar/proxy:ro", …]
 * ```
 */
export function forwarderCreateArgs(bridge: { hostDir: string }): string[] {
  return [
    "-v",
    `${bridge.hostDir}:${CONTAINER_PROXY_DIR}:ro`,
    "-v",
    `${FORWARDERS_DIR}:${CONTAINER_FORWARDERS_DIR}:ro`,
  ];
}

/**
 * The container's PID 1 (a POSIX `sh` script): probes `node`, `python3`, `socat` in that order
 * and `exec`s the first it finds as the forwarder; with none it says so and exits.
 *
 * @example
 * ```ts
 * dockerArgs.push(image, "sh", "-c", forwarderScript(41000));
 * ```
 */
export function forwarderScript(port: number): string {
  const sock = `${CONTAINER_PROXY_DIR}/${SOCKET_NAME}`;
  const dir = CONTAINER_FORWARDERS_DIR;
  return [
    `if command -v node >/dev/null 2>&1; then exec node ${dir}/forward.cjs ${sock} ${port}; fi`,
    `if command -v python3 >/dev/null 2>&1; then exec python3 ${dir}/forward.py ${sock} ${port}; fi`,
    // socat says "listening on" at notice level (-d -d); the gateway waits for it.
    `if command -v socat >/dev/null 2>&1; then exec socat -d -d TCP-LISTEN:${port},bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:${sock}; fi`,
    `echo "${MISSING}" >&2`,
    "exit 97",
  ].join("\n");
}

/** The error of an image without any forwarder. */
export function missingForwarderMessage(image: string): string {
  return (
    `runtime: allow_internet=false: image '${image}' has none of ${FORWARDER_CANDIDATES.join(", ")} on its PATH, ` +
    "so nothing inside the network-less container can relay the harness's calls to the proxy. " +
    "Install one of them in the image (e.g. python3 or socat), or set runtime.allow_internet: true"
  );
}

/** How {@link waitForForwarder} looks into the container. */
export interface ForwarderProbe {
  /** Output of the container's PID 1 so far (stdout and stderr). */
  logs(): Promise<string>;
  /** False once the container has stopped. */
  running(): Promise<boolean>;
}

/**
 * Waits until the forwarder listens; throws an infra {@link SessionFailure} when the image has
 * no forwarder, when the forwarder died, or after `timeoutMs`.
 *
 * @example
 * ```ts
 * const kind = await waitForForwarder(probe, "python:3.12", { signal });
 * ```
 */
export async function waitForForwarder(
  probe: ForwarderProbe,
  image: string,
  opts: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<string> {
  const deadline = Date.now() + (opts.timeoutMs ?? FORWARDER_READY_TIMEOUT_MS);
  for (let round = 0; ; round++) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    const logs = await probe.logs();
    const ready = new RegExp(`${READY} (\\w+)`).exec(logs);
    if (ready) return ready[1] as string;
    if (/socat\[\d+\] N listening on/.test(logs)) return "socat";
    if (logs.includes(MISSING)) throw new SessionFailure("infra", missingForwarderMessage(image));
    const late = Date.now() > deadline;
    // Every few rounds (and at the end): a forwarder that died will never be ready.
    if (late || round % 5 === 4) {
      if (late || !(await probe.running())) {
        throw new SessionFailure(
          "infra",
          `runtime: the proxy forwarder in the network-less container ${late ? "did not start listening in time" : "exited"}: ${logs.trim().slice(-800) || "(no output)"}`,
        );
      }
    }
    await new Promise((r) => setTimeout(r, Math.min(50 * (round + 1), 250)));
  }
}
