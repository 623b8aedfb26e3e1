/**
 * The operator commands' requests have a deadline: `polar status` against a control plane that
 * accepts the connection and never answers exits 1 after `--request-timeout-seconds`, naming the
 * URL, the deadline and the flag (before, it waited for undici's 300 s headers timeout).
 */
import net from "node:net";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UsageError } from "../usage-error";
import { REPO_ROOT } from "../wrangler-dev";
import { DEFAULT_REQUEST_TIMEOUT_SECONDS, requestTimeoutMs } from "./connection";

const POLAR = join(REPO_ROOT, "bin", "polar.mjs");
/** The environment without any POLAR_* variable of the machine running the tests. */
const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("POLAR_")));

let silent: net.Server;
let url: string;
const sockets = new Set<net.Socket>();

beforeAll(async () => {
  // Accepts, reads, never answers: a stalled control plane or a flow a middlebox forgot.
  silent = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

describe("request deadline of the operator commands", () => {
  it("takes --request-timeout-seconds, else POLAR_REQUEST_TIMEOUT_SECONDS, else 30 s", () => {
    expect(requestTimeoutMs({ requestTimeoutSeconds: 1.5 }, { POLAR_REQUEST_TIMEOUT_SECONDS: "9" })).toBe(
      1_500,
    );
    expect(requestTimeoutMs({}, { POLAR_REQUEST_TIMEOUT_SECONDS: "9" })).toBe(9_000);
    expect(requestTimeoutMs({}, {})).toBe(DEFAULT_REQUEST_TIMEOUT_SECONDS * 1000);
    expect(() => requestTimeoutMs({}, { POLAR_REQUEST_TIMEOUT_SECONDS: "soon" })).toThrow(UsageError);
    expect(() => requestTimeoutMs({}, { POLAR_REQUEST_TIMEOUT_SECONDS: "0" })).toThrow(
      "POLAR_REQUEST_TIMEOUT_SECONDS must be a number of seconds > 0, got '0'",
    );
  });

  it("polar status exits 1 after the deadline against a server that never answers, naming URL and deadline", async () => {
    const started = Date.now();
    const run = await execa(
      process.execPath,
      [POLAR, "status", "b1", "--control-plane", url, "--request-timeout-seconds", "1"],
      { env: { ...clean, POLAR_TRAINER_TOKEN: "t" }, extendEnv: false, reject: false, timeout: 20_000 },
    );
    const took = Date.now() - started;
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toContain(`polar: GET ${url}/v1/batches/b1: no complete answer within 1000 ms`);
    expect(run.stderr).toContain("--request-timeout-seconds or POLAR_REQUEST_TIMEOUT_SECONDS");
    expect(took).toBeLessThan(15_000);
  });
});
