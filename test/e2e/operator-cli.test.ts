/**
 * The operator CLI against the real local stack (wrangler dev, the sim engine, one gateway), each
 * command run as a user runs it: `node bin/polar.mjs …` as a child process, the token from the
 * environment, its stdout parsed. One stack for the file; the commands that change the fleet
 * (pause, drain) run last.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ControlPlaneError } from "../../cli/client";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { program } from "../../cli/main";
import { REPO_ROOT } from "../../cli/wrangler-dev";

let stack: LocalStack;
let scratch: string;
const HELLO = {
  task_id: "hello",
  instruction: "What is 17 * 23?",
  num_samples: 2,
  timeout_seconds: 120,
  runtime: {
    backend: "local",
    prepare: [{ type: "upload_file", source: "examples/hello/ask.mjs", target: "ask.mjs" }],
  },
  agent: { harness: "shell", custom_shell: { command: "node ask.mjs {{INSTRUCTION}}" } },
  evaluator: { strategy: "session_completed" },
};
/** A task whose sessions stay RUNNING until cancelled. */
const SLEEPER = {
  task_id: "sleeper",
  instruction: "wait",
  num_samples: 2,
  timeout_seconds: 120,
  agent: { harness: "shell", custom_shell: { command: "sleep 90" } },
};

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "polar-operator-cli-"));
  writeFileSync(join(scratch, "hello.json"), JSON.stringify({ tasks: [HELLO] }));
  writeFileSync(join(scratch, "mixed.json"), JSON.stringify({ tasks: [HELLO, SLEEPER] }));
  stack = await startLocalStack({ gateways: 1 });
});
afterAll(async () => {
  await stack?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

type Role = "trainer" | "admin" | "viewer" | "none";

/** `polar ARGS` as a child process, pointed at the stack, with one role's token (or none). */
async function polar(args: string[], role: Role = "trainer") {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    NO_COLOR: "1",
  };
  if (role === "trainer") env.POLAR_TRAINER_TOKEN = stack.tokens.trainer;
  if (role === "admin") env.POLAR_ADMIN_TOKEN = stack.tokens.admin;
  if (role === "viewer") env.POLAR_VIEWER_TOKEN = stack.tokens.viewer!;
  const withUrl = args.includes("--help") ? args : [...args, "--control-plane", stack.controlPlane.url];
  return execa(process.execPath, [join(REPO_ROOT, "bin", "polar.mjs"), ...withUrl], {
    cwd: REPO_ROOT,
    env,
    extendEnv: false,
    reject: false,
    timeout: 150_000,
  });
}
const json = (stdout: string) => JSON.parse(stdout) as Record<string, unknown>;
const lines = (stdout: string) => stdout.split("\n").filter((l) => l.trim() !== "");

const OPERATOR_COMMANDS = [
  "batches",
  "status",
  "results",
  "cancel",
  "gateways",
  "drain",
  "pause",
  "resume",
  "policy-version",
  "submit",
];

describe("every operator command", () => {
  it("is in the command table with --help, --json and --control-plane", async () => {
    for (const name of OPERATOR_COMMANDS) {
      const cmd = program.commands.find((c) => c.name() === name);
      expect(cmd, name).toBeDefined();
      const flags = cmd!.options.map((o) => o.long);
      expect(flags, name).toEqual(expect.arrayContaining(["--json", "--control-plane", "--url"]));
    }
    const help = await polar(["status", "--help"], "none");
    expect(help.exitCode).toBe(0);
    expect(help.stdout).toContain("Usage: polar status [options] [batch_id]");
  });
});

let batchId: string;

describe("submit --wait, batches, status, results", () => {
  it("submit --wait prints a progress line per session (stdout is no TTY), then the table", async () => {
    const run = await polar(["submit", join(scratch, "hello.json"), "--wait", "--batch-id", "cli-hello"]);
    expect(run.exitCode, run.stderr).toBe(0);
    batchId = "cli-hello";
    const progress = lines(run.stdout).filter((l) => / done, mean reward /.test(l));
    expect(progress.map((l) => l.split(" ")[0])).toEqual(["1/2", "2/2"]);
    expect(progress[1]).toMatch(
      /^2\/2 done, mean reward 1\.00, 0 errors; cli-hello\.0\.\d COMPLETED, reward 1\.00$/,
    );
    expect(run.stdout).toContain("session");
  });

  it("batches lists it (table and --json)", async () => {
    const text = await polar(["batches"]);
    expect(text.exitCode, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/cli-hello\s+default\s+1\s+2/);
    const page = json((await polar(["batches", "--json", "--limit", "1"])).stdout);
    expect(page.batches).toEqual([expect.objectContaining({ batch_id: "cli-hello", sessions: 2 })]);
  });

  it("status ID shows the batch's counts and summary, with a viewer token too", async () => {
    const text = await polar(["status", batchId], "viewer");
    expect(text.exitCode, text.stderr).toBe(0);
    expect(text.stdout).toContain("batch cli-hello (default): completed, 2/2 sessions done");
    expect(text.stdout).toMatch(
      /^mean reward 1\.00, pass rate 1\.00, tokens [1-9]\d* prompt \/ [1-9]\d* response$/m,
    );
    expect(text.stdout).toMatch(/^hello\s+shell\s+2\s+1\.00\s+1\.00\s+COMPLETED=2$/m);
    expect(json((await polar(["status", batchId, "--json"])).stdout)).toMatchObject({
      batch_id: batchId,
      completed_sessions: 2,
      summary: { total: 2, mean_reward: 1, pass_rate: 1, tasks: [{ task_id: "hello", harness: "shell" }] },
    });
  });

  it("results prints one {seq, result} JSON line per session; --after skips the first", async () => {
    const all = lines((await polar(["results", batchId])).stdout).map(json);
    expect(all.map((r) => r.seq)).toEqual([1, 2]);
    expect(all.map((r) => (r.result as { status: string }).status)).toEqual(["COMPLETED", "COMPLETED"]);
    const rest = lines((await polar(["results", batchId, "--after", "1"])).stdout).map(json);
    expect(rest.map((r) => r.seq)).toEqual([2]);
  });

  it("results --follow streams a running batch until it is done", async () => {
    const submit = await polar(["submit", join(scratch, "hello.json"), "--batch-id", "cli-follow", "--json"]);
    expect(json(submit.stdout)).toMatchObject({ batch_id: "cli-follow", sessions: 2 });
    const follow = await polar(["results", "cli-follow", "--follow"]);
    expect(follow.exitCode, follow.stderr).toBe(0);
    expect(
      lines(follow.stdout)
        .map((l) => (json(l).result as { session_id: string }).session_id)
        .sort(),
    ).toEqual(["cli-follow.0.0", "cli-follow.0.1"]);
  });
});

describe("bad input names the flag or the variable", () => {
  it.each([
    [["batches", "--limit", "0"], "--limit must be a positive integer"],
    [["results", "x", "--after", "-1"], "--after must be an integer >= 0"],
    [["pause", "--mode", "sideways"], "--mode"],
    [["pause", "--timeout-seconds", "soon"], "--timeout-seconds must be a number of seconds >= 0"],
  ])("%j → exit 1, %s", async (args, message) => {
    const run = await polar(args);
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toContain(message);
  });

  it("a missing token names the variables, exit 2", async () => {
    const run = await polar(["drain", "node-0"], "trainer");
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain("POLAR_ADMIN_TOKEN is not set");
  });

  it("a URL that is none names --control-plane, exit 2", async () => {
    const run = await polar(["gateways", "--url", "not a url"]);
    expect(run.exitCode).toBe(2);
    expect(run.stderr).toContain("--control-plane: 'not a url' is not a URL");
  });

  it("an unknown batch is the API's 404, through the generated client's typed error", async () => {
    const run = await polar(["status", "no-such-batch"]);
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toContain("404 not_found: batch 'no-such-batch' does not exist");
    const err = await stack.client.status("no-such-batch").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ControlPlaneError);
    expect(err).toMatchObject({ status: 404, code: "not_found" });
  });
});

describe("cancel", () => {
  it("cancels one task, then the batch, ending the sessions still running", async () => {
    const submit = await polar(["submit", join(scratch, "mixed.json"), "--batch-id", "cli-cancel", "--json"]);
    expect(submit.exitCode, submit.stderr).toBe(0);
    const task = json((await polar(["cancel", "cli-cancel", "--task", "sleeper", "--json"])).stdout);
    expect(task).toMatchObject({ batch_id: "cli-cancel", task_id: "sleeper", status: "cancelled" });
    expect(task.cancelled_sessions).toBe(2);
    const batch = await polar(["cancel", "cli-cancel"]);
    expect(batch.stdout).toMatch(/^batch cli-cancel: cancelled, \d+ sessions ended$/m);
    const status = json((await polar(["status", "cli-cancel", "--json"])).stdout) as {
      tasks: Array<{ task_id: string; counts: Record<string, number> }>;
    };
    expect(status.tasks.find((t) => t.task_id === "sleeper")?.counts.CANCELLED).toBe(2);
    expect((await polar(["status", "cli-cancel"])).stdout).toMatch(
      /^batch cli-cancel \(default\): cancelled, /m,
    );
  });
});

describe("the fleet: gateways, status, the fence, drain", () => {
  it("gateways and status without an id show the connected gateway and the open fence", async () => {
    const list = json((await polar(["gateways", "--json"])).stdout) as {
      gateways: Array<{ node_id: string; connected: boolean }>;
    };
    expect(list.gateways).toEqual([expect.objectContaining({ node_id: "node-0", connected: true })]);
    const fleet = await polar(["status"]);
    expect(fleet.exitCode, fleet.stderr).toBe(0);
    expect(fleet.stdout).toMatch(/^default\s+default\s+\d+\s+\d+\s+open\s/m);
    expect(fleet.stdout).toContain("gateways: 1 connected of 1");
    expect(fleet.stdout).toMatch(/^node-0\s+default\s+up\s/m);
  });

  it("pause, policy-version and resume change the queue's fence, acked by the gateway", async () => {
    const pause = json((await polar(["pause", "--timeout-seconds", "10", "--json"])).stdout) as {
      ok: boolean;
      fence: { paused: boolean; mode: string };
      nodes: Array<{ node_id: string; paused: boolean }>;
    };
    expect(pause).toMatchObject({ ok: true, fence: { paused: true, mode: "drain" } });
    expect(pause.nodes).toEqual([expect.objectContaining({ node_id: "node-0", paused: true })]);
    const fleet = json((await polar(["status", "--json"])).stdout) as {
      fences: Array<{ queue: string; fence: { paused: boolean } }>;
    };
    expect(fleet.fences).toEqual([
      expect.objectContaining({ queue: "default", fence: expect.objectContaining({ paused: true }) }),
    ]);
    const version = await polar(["policy-version", "7"]);
    expect(version.stdout).toMatch(/^queue default: paused \(drain\), policy_version 7, fence_seq \d+$/m);
    const resume = json((await polar(["resume", "--policy-version", "8", "--json"])).stdout);
    expect(resume).toMatchObject({ ok: true, fence: { paused: false, policy_version: "8" } });
  });

  it("drain (admin) marks the gateway draining", async () => {
    const drain = await polar(["drain", "node-0"], "admin");
    expect(drain.exitCode, drain.stderr).toBe(0);
    expect(drain.stdout).toBe("gateway node-0 (queue default): draining");
    const list = await polar(["gateways"]);
    expect(list.stdout).toMatch(/^node-0\s+default\s+draining\s/m);
  });
});

describe("the served document", () => {
  it("is the checked-in copy the client's types come from", async () => {
    const served = await (await fetch(`${stack.controlPlane.url}/openapi.json`)).json();
    expect(served).toEqual(
      JSON.parse(readFileSync(join(REPO_ROOT, "clients/typescript/openapi.json"), "utf8")),
    );
  });
});
