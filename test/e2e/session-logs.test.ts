/**
 * Per-session logs and token text from the trainer's side, every part a real process (wrangler
 * dev, a token-mode gateway, the simulated engine): a shell-harness session that writes to stderr
 * and exits non-zero fails, and its logs are read back with `polar logs` and the API; a session
 * that calls the model has token text with exactly one string per id of its trajectory.
 */
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { SessionLogs, SessionResult, SessionTokens, Trajectory } from "../../protocol";

/** One chat call through the gateway's proxy, then a line on stdout. */
const ASK_SCRIPT = `
const res = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {
  method: "POST",
  headers: { authorization: "Bearer " + process.env.OPENAI_API_KEY, "content-type": "application/json" },
  body: JSON.stringify({ model: process.env.OPENAI_MODEL, messages: [{ role: "user", content: "What is 2 + 2?" }] }),
});
if (!res.ok) { console.error(res.status, await res.text()); process.exit(2); }
console.log("asked the model");
`;

let stack: LocalStack;
const results = new Map<string, SessionResult>();

async function get(path: string): Promise<Response> {
  return fetch(`${stack.controlPlane.url}${path}`, {
    headers: { authorization: `Bearer ${stack.tokens.trainer}` },
  });
}

function polar(args: string[]) {
  return execa(
    "node",
    [join(REPO_ROOT, "bin/polar.mjs"), ...args, "--control-plane", stack.controlPlane.url],
    {
      env: { POLAR_TRAINER_TOKEN: stack.tokens.trainer },
      reject: false,
    },
  );
}

beforeAll(async () => {
  stack = await startLocalStack({ gateways: 1, engine: "sglang" });
  const created = await stack.client.submit({
    tasks: [
      {
        task_id: "broken",
        instruction: "run the broken tool",
        max_attempts: 1,
        agent: {
          harness: "shell",
          custom_shell: {
            command: `echo "starting the tool"; echo "fatal: config.toml not found" >&2; exit 3`,
          },
        },
      },
      {
        task_id: "asks",
        instruction: "ask the model",
        agent: {
          harness: "shell",
          custom_shell: { command: `node --input-type=module -e "$ASK_SCRIPT"`, env: { ASK_SCRIPT } },
        },
      },
    ],
  });
  for await (const { result } of stack.client.streamResults(created.batch_id, { timeoutMs: 120_000 }))
    results.set(result.task_id, result);
});

afterAll(async () => {
  await stack?.stop();
});

describe("session logs and token text, read by the trainer", () => {
  it("a failing shell session's stderr is readable with the API and polar logs", async () => {
    const failed = results.get("broken")!;
    expect(failed.status).toBe("ERROR");
    const res = await get(`/v1/sessions/${failed.session_id}/logs`);
    expect(res.status).toBe(200);
    const logs = (await res.json()) as SessionLogs;
    const stderr = logs.streams.find((s) => s.name === "harness.stderr")!;
    expect(stderr.text).toContain("fatal: config.toml not found");
    expect(stderr).toMatchObject({ truncated: false, bytes_kept: stderr.bytes_total });
    const view = (await (await get(`/v1/sessions/${failed.session_id}`)).json()) as Record<string, unknown>;
    expect(view).toMatchObject({ has_logs: true, has_tokens: false });

    const cli = await polar(["logs", failed.session_id]);
    expect(cli.exitCode, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(/^=== harness\.stderr \(\d+ bytes\) ===$/m);
    expect(cli.stdout).toContain("fatal: config.toml not found");
    expect(cli.stdout).toContain("starting the tool");
    const one = await polar(["logs", failed.session_id, "--stream", "harness.stderr", "--json"]);
    expect(JSON.parse(one.stdout).streams.map((s: { name: string }) => s.name)).toEqual(["harness.stderr"]);
  });

  it("polar logs names an unknown session and fails", async () => {
    const missing = `${results.get("broken")!.batch_id}.7.0`;
    const cli = await polar(["logs", missing]);
    expect(cli.exitCode).toBe(1);
    expect(cli.stderr).toContain(`session '${missing}' does not exist`);
  });

  it("a token-mode session has token text with exactly one string per id", async () => {
    const ok = results.get("asks")!;
    expect(ok.status, ok.error?.message).toBe("COMPLETED");
    const trajectory = (await (await get(`/v1/sessions/${ok.session_id}/trajectory`)).json()) as Trajectory;
    const res = await get(`/v1/sessions/${ok.session_id}/tokens`);
    expect(res.status).toBe(200);
    const tokens = (await res.json()) as SessionTokens;
    expect(tokens.traces).toHaveLength(trajectory.traces.length);
    expect(trajectory.traces.length).toBeGreaterThan(0);
    tokens.traces.forEach((t, i) => {
      expect(t.prompt).toHaveLength(trajectory.traces[i]!.prompt_ids.length);
      expect(t.response).toHaveLength(trajectory.traces[i]!.response_ids.length);
    });
    expect(tokens.traces[0]!.prompt.join("")).toContain("What is 2 + 2?");
  });
});
