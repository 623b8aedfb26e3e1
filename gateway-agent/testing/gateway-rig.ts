/**
 * A gateway under test with everything it talks to: the fixture SGLang engine, the fake control
 * plane and a scratch folder, started together and torn down together. Test-only.
 *
 * @module
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type FixtureEngine, startFixtureEngine } from "../../proxy/testing/fixture-engine";
import { type Gateway, type GatewayOptions, startGateway } from "../gateway";
import { type FakeControlPlane, startFakeControlPlane } from "./fake-control-plane";

/** The model name the fixture engine serves in gateway tests. */
export const TEST_MODEL = "Qwen/Qwen3-8B";

/** A logger that drops everything (tests assert on messages, not logs). */
export const QUIET_LOGGER = { info() {}, warn() {}, error() {} };

/** One line a {@link recordingLogger} kept. */
export interface LoggedLine {
  level: "info" | "warn" | "error";
  msg: string;
  fields: Record<string, unknown>;
}

/**
 * A logger that keeps every line, for tests that assert on what the gateway says.
 *
 * @example
 * ```ts
 * const { lines, logger } = recordingLogger();
 * await startGatewayRig({ nodeId: "gpu-0", token: "t", gateway: { logger } });
 * lines.find((l) => l.level === "warn");
 * ```
 */
export function recordingLogger() {
  const lines: LoggedLine[] = [];
  const at =
    (level: LoggedLine["level"]) =>
    (msg: string, fields: object = {}) =>
      lines.push({ level, msg, fields: fields as Record<string, unknown> });
  return { lines, logger: { info: at("info"), warn: at("warn"), error: at("error") } };
}

/** Options of {@link startGatewayRig}. */
export interface GatewayRigOptions {
  nodeId: string;
  /** Bearer token the fake control plane expects. */
  token: string;
  /** A scratch folder to use (created by the caller); a fresh one under the OS temp folder otherwise. */
  scratch?: string;
  /** Overrides of the gateway options (runtime settings, HTTP server, …). */
  gateway?: Partial<GatewayOptions>;
}

/** The running rig; `stop()` stops the gateway, the control plane, the engine and removes scratch. */
export interface GatewayRig {
  engine: FixtureEngine;
  cp: FakeControlPlane;
  gateway: Gateway;
  scratch: string;
  stop(): Promise<void>;
}

/**
 * Starts engine, fake control plane and gateway (work root `<scratch>/work`) and waits for the
 * gateway's hello, so assigns sent afterwards reach a connected gateway.
 *
 * @example
 * ```ts
 * const rig = await startGatewayRig({ nodeId: "gpu-0", token: "t", gateway: { runtimeSettings } });
 * rig.cp.send(makeAssign({ command: ASK }));
 * await rig.stop();
 * ```
 */
export async function startGatewayRig(opts: GatewayRigOptions): Promise<GatewayRig> {
  const scratch = opts.scratch ?? (await mkdtemp(path.join(tmpdir(), "polar-gw-rig-")));
  const engine = await startFixtureEngine({ model: TEST_MODEL });
  const cp = await startFakeControlPlane({ token: opts.token });
  let gateway: Gateway | undefined;
  const stop = async () => {
    await gateway?.stop();
    await cp.close();
    await engine.close();
    await rm(scratch, { recursive: true, force: true });
  };
  try {
    gateway = await startGateway({
      controlPlaneUrl: cp.url,
      nodeId: opts.nodeId,
      token: opts.token,
      engine: "sglang-openai",
      engineUrl: engine.url,
      model: TEST_MODEL,
      workRoot: path.join(scratch, "work"),
      reconnect: { initialDelayMs: 20, maxDelayMs: 100 },
      logger: QUIET_LOGGER,
      ...opts.gateway,
    });
    await cp.waitFor((m) => m.type === "hello");
  } catch (err) {
    await stop();
    throw err;
  }
  return { engine, cp, gateway, scratch, stop };
}
