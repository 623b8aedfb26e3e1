import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { SessionAssignment } from "../../protocol";
import { baseEnv } from "./env";
import { harnessEnv } from "./plan";
import { renderShellCommand, shellHarness } from "./shell";

describe("renderShellCommand", () => {
  it.each([
    "plain",
    `it's "quoted" with $HOME and \`backticks\` and $(id)`,
    "multi\nline\n\ttabbed",
    "{{INSTRUCTION}} inside itself",
    "-starts-with-dash ; rm -rf / # not executed",
    "",
  ])("hands %j to bash as one literal argument", (instruction) => {
    const command = renderShellCommand('printf "%s|" {{INSTRUCTION}} end', instruction);
    const out = execFileSync("bash", ["-c", command], { env: baseEnv() }).toString();
    expect(out).toBe(`${instruction}|end|`);
  });
});

describe("shellHarnessEnv", () => {
  const session = SessionAssignment.parse({
    session_id: "b.t.0",
    batch_id: "b",
    task_id: "t",
    attempt: 1,
    instruction: "do it",
    timeout_seconds: 10,
    runtime: { env: { FROM_RUNTIME: "1", OPENAI_BASE_URL: "http://elsewhere/v1" } },
    agent: {
      harness: "shell",
      env: { FROM_AGENT: "2" },
      custom_shell: { command: "true", env: { FROM_SHELL: "3" } },
    },
    builder: { strategy: "per_request" },
    evaluator: null,
    metadata: {},
    dispatch_priority: 0,
  });
  const dirs = { sessionDir: "/s", workspace: "/s/workspace", logsDir: "/s/logs" };

  it("layers task env under the session wiring, which cannot be overridden", () => {
    const ctx = {
      session,
      proxyUrl: "http://127.0.0.1:9",
      sessionKey: "sk-polar-x",
      model: "m",
      sessionPath: dirs.sessionDir,
      workdir: dirs.workspace,
    };
    const plan = shellHarness(ctx);
    expect(plan.steps).toEqual([{ command: "true", cwd: undefined }]);
    const env = harnessEnv({ PATH: "/bin" }, ctx, plan);
    expect(env).toMatchObject({
      PATH: "/bin",
      FROM_RUNTIME: "1",
      FROM_AGENT: "2",
      FROM_SHELL: "3",
      OPENAI_BASE_URL: "http://127.0.0.1:9/v1",
      OPENAI_API_KEY: "sk-polar-x",
      ANTHROPIC_API_KEY: "sk-polar-x",
      GOOGLE_API_KEY: "sk-polar-x",
      OPENAI_MODEL: "m",
      HOME: "/s/home",
      POLAR_INSTRUCTION: "do it",
      POLAR_INSTRUCTION_FILE: "/s/instruction.txt",
      POLAR_SESSION_ID: "b.t.0",
      POLAR_TASK_ID: "t",
    });
  });

  it("puts the pre-installed harness folder's bin/ first on PATH when POLAR_HARNESS_DIR is set", () => {
    const env = baseEnv({ PATH: "/usr/bin:/bin", POLAR_HARNESS_DIR: "/opt/polar/harnesses" });
    expect(env.PATH).toBe("/opt/polar/harnesses/bin:/usr/bin:/bin");
    // The variable itself stays with the gateway.
    expect(env).not.toHaveProperty("POLAR_HARNESS_DIR");
    expect(baseEnv({ POLAR_HARNESS_DIR: "/opt/h" }).PATH).toBe("/opt/h/bin");
  });

  it("copies only allow-listed variables from the host", () => {
    expect(
      baseEnv({ PATH: "/bin", HOME: "/h", POLAR_GATEWAY_TOKEN: "secret", AWS_SECRET_ACCESS_KEY: "k" }),
    ).toEqual({
      PATH: "/bin",
      HOME: "/h",
    });
  });
});
