import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { program } from "../main";
import { UsageError } from "../usage-error";
import { requirePortFree, runStack, type StackInfo, stackLines } from "./stack";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A listener on a free loopback port, closed after the test. */
async function occupied(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return (server.address() as { port: number }).port;
}

const info: StackInfo = {
  url: "http://127.0.0.1:8787",
  dashboard: "http://127.0.0.1:8787/#token=v",
  tokens: { trainer: "t", admin: "a", viewer: "v", gateway: "g" },
  engine: "sim",
  engine_url: "http://127.0.0.1:30000",
  model: "Qwen/Qwen3-0.6B",
  model_path: null,
  gateways: ["node-0"],
  gateway_url: "http://127.0.0.1:9100",
  gateway_cwd: "/repo",
  state: "/tmp/polar-stack-x",
};

describe("polar stack", () => {
  it("refuses a port in use with an error naming the flag, before starting anything", async () => {
    const port = await occupied();
    await expect(requirePortFree(port, "--engine-port")).rejects.toThrow(UsageError);
    await expect(requirePortFree(port, "--engine-port")).rejects.toThrow(
      new RegExp(`^--engine-port ${port}: 127\\.0\\.0\\.1:${port} is in use`),
    );
    await expect(requirePortFree(0, "--port")).resolves.toBeUndefined();
    // The whole command stops at the check (no wrangler started: it would take seconds).
    await expect(
      runStack({ engine: "sim", port, enginePort: 0, gatewayPort: 0, json: false }),
    ).rejects.toThrow(/^--port \d+: .* is in use/);
  });

  it("refuses the same port for two parts", async () => {
    const [a, b] = [await occupied(), await occupied()];
    await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
    await expect(
      runStack({ engine: "sim", port: a, enginePort: a, gatewayPort: b, json: false }),
    ).rejects.toThrow(/--port, --engine-port and --gateway-port must differ/);
  });

  it("prints paste-able shell: export lines for what the CLI and polar_trainer read, comments for the rest", () => {
    const lines = stackLines(info);
    expect(lines.slice(0, 4)).toEqual([
      "export POLAR_URL=http://127.0.0.1:8787",
      "export POLAR_TRAINER_TOKEN=t",
      "export POLAR_ADMIN_TOKEN=a",
      "export POLAR_VIEWER_TOKEN=v",
    ]);
    expect(lines.every((l) => /^(export POLAR_[A-Z_]+=\S+|# .+)$/.test(l))).toBe(true);
    expect(lines.join("\n")).toContain("upload_file sources resolve against /repo");
    expect(stackLines({ ...info, engine: "reference", model_path: "/s/weights/v0" }).join("\n")).toContain(
      "checkpoint /s/weights/v0",
    );
  });

  it("parses its flags: defaults, choices and ports named in errors", () => {
    const stack = program.commands.find((c) => c.name() === "stack")!;
    stack.exitOverride();
    stack.configureOutput({ writeErr: () => {}, writeOut: () => {} });
    const defaults = stack.opts();
    expect(defaults).toMatchObject({ engine: "sim", port: 8787, enginePort: 0, gatewayPort: 0, json: false });
    const bad = (args: string[]) => {
      try {
        stack.parse(args, { from: "user" });
      } catch (err) {
        return (err as Error).message;
      }
      return "";
    };
    expect(bad(["--engine", "vllm"])).toMatch(/--engine <name>.*vllm.*Allowed choices are sim, reference/);
    expect(bad(["--engine-port", "70000"])).toMatch(/--engine-port <n>.*must be a port number/);
    expect(bad(["--max-run", "0"])).toMatch(/--max-run must be a positive integer/);
  });
});
