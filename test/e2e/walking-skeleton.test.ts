/**
 * The walking skeleton across every part, each as a real process: trainer → control plane
 * (`wrangler dev`, Worker + Durable Objects in workerd) → gateway agent over its outbound
 * WebSocket → shell harness (a child process) → proxy → simulated SGLang engine → token-exact
 * trajectory → result back to the trainer.
 */
import { join } from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createToken } from "../../cli/commands/token";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { SessionResult } from "../../protocol";
import { type ChatTokenizer, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";

let stack: LocalStack;
let tokenizer: ChatTokenizer;

beforeAll(async () => {
  [stack, tokenizer] = await Promise.all([startLocalStack({ gateways: 1 }), loadChatTokenizer()]);
});

afterAll(async () => {
  await stack?.stop();
});

async function post(path: string, body: string, token?: string) {
  const res = await fetch(`${stack.controlPlane.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body,
  });
  return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } };
}

describe("startLocalStack", () => {
  // The fence routes and GET /v1/gateways list connected gateways only: a caller that fences or
  // counts gateways right after start must not race the gateway's hello.
  it("returns once every gateway it started is connected", async () => {
    const res = await fetch(`${stack.controlPlane.url}/v1/gateways`, {
      headers: { authorization: `Bearer ${stack.tokens.trainer}` },
    });
    const body = (await res.json()) as { gateways: Array<{ node_id: string; connected: boolean }> };
    expect(body.gateways.filter((g) => g.connected).map((g) => g.node_id)).toEqual(["node-0"]);
  });
});

const validTask = {
  task_id: "t1",
  instruction: "What is 2 + 2?",
  agent: { harness: "shell", custom_shell: { command: "true" } },
};

describe("bad input is refused and nothing is stored", () => {
  it.each([
    [
      "missing instruction",
      { batch_id: "bad-1", tasks: [{ ...validTask, instruction: undefined }] },
      "tasks[0].instruction",
    ],
    [
      "num_samples 0",
      { batch_id: "bad-2", tasks: [{ ...validTask, num_samples: 0 }] },
      "tasks[0].num_samples",
    ],
    ["unknown key", { batch_id: "bad-3", tasks: [{ ...validTask, nmu_samples: 2 }] }, "tasks[0].nmu_samples"],
  ])("%s → 400 naming %s", async (_name, body, field) => {
    const res = await post("/v1/batches", JSON.stringify(body), stack.tokens.trainer);
    expect(res.status).toBe(400);
    expect(res.body.error?.code).toBe("validation_failed");
    expect(res.body.error?.message).toContain(field);
    const id = (body as { batch_id: string }).batch_id;
    const get = await fetch(`${stack.controlPlane.url}/v1/batches/${id}`, {
      headers: { authorization: `Bearer ${stack.tokens.trainer}` },
    });
    expect(get.status).toBe(404);
  });

  it("non-JSON body → 400 invalid_json", async () => {
    const res = await post("/v1/batches", "{not json", stack.tokens.trainer);
    expect(res.status).toBe(400);
    expect(res.body.error?.code).toBe("invalid_json");
  });

  it("missing or wrong token → 401, and the batch is not stored", async () => {
    const body = JSON.stringify({ batch_id: "unauth-1", tasks: [validTask] });
    expect((await post("/v1/batches", body)).status).toBe(401);
    expect((await post("/v1/batches", body, "wrong-token")).status).toBe(401);
    expect((await post("/v1/batches", body, stack.tokens.gateway)).status).toBe(401);
    const get = await fetch(`${stack.controlPlane.url}/v1/batches/unauth-1`, {
      headers: { authorization: `Bearer ${stack.tokens.trainer}` },
    });
    expect(get.status).toBe(404);
  });
});

describe("one task × 4 samples through every part", () => {
  let results: SessionResult[];
  let batchId: string;

  beforeAll(async () => {
    const batch = loadTaskFile(join(REPO_ROOT, "examples/hello/task.yaml"));
    const created = await stack.client.submit(batch);
    batchId = created.batch_id;
    expect(created.sessions).toBe(4);
    results = [];
    for await (const { result } of stack.client.streamResults(batchId, { timeoutMs: 150_000 }))
      results.push(result);
  });

  it("every session completes once, with reward from the evaluator", async () => {
    expect(results.map((r) => r.status)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"]);
    expect(new Set(results.map((r) => r.session_id)).size).toBe(4);
    for (const r of results) expect(r.reward).toBe(1);
    const status = await stack.client.status(batchId);
    expect(status.status).toBe("completed");
    expect(status.completed_sessions).toBe(4);
  });

  it("each trace's prompt_ids decode to the Qwen3 rendering of the messages the harness sent", () => {
    for (const r of results) {
      // ask.mjs makes two calls: the question, then "Are you sure?" with the first answer echoed.
      expect(r.trajectory.traces).toHaveLength(2);
      for (const trace of r.trajectory.traces) {
        const messages = trace.prompt_messages;
        expect(messages[1]).toMatchObject({ role: "user", content: "What is 17 * 23?" });
        const rendered = tokenizer.render(messages, {
          tools: trace.tools ?? undefined,
          addGenerationPrompt: true,
        });
        expect(tokenizer.decode(trace.prompt_ids)).toBe(rendered);
      }
      const second = r.trajectory.traces[1]!;
      expect(second.prompt_messages.at(-1)).toMatchObject({
        role: "user",
        content: "Are you sure? Reply with just the number.",
      });
    }
  });

  it("response ids, logprobs and loss mask are aligned and non-empty", () => {
    for (const r of results) {
      for (const trace of r.trajectory.traces) {
        expect(trace.response_ids.length).toBeGreaterThan(0);
        expect(trace.response_logprobs).not.toBeNull();
        expect(trace.response_logprobs!.length).toBe(trace.response_ids.length);
        expect(trace.loss_mask).toEqual(trace.response_ids.map(() => 1));
        // The decoded sample is the assistant message the harness received (plus the end-of-turn token).
        const content = trace.response_messages[0]?.content;
        expect(typeof content).toBe("string");
        expect(tokenizer.decode(trace.response_ids)).toContain(content as string);
      }
    }
  });
});

describe("a gateway the control plane refuses for good exits instead of reconnecting", () => {
  const serve = (token: string, nodeId: string) =>
    execa(
      process.execPath,
      [
        join(REPO_ROOT, "bin", "polar.mjs"),
        "serve_gateway",
        "--control-plane",
        stack.controlPlane.url,
        "--node-id",
        nodeId,
        "--engine-url",
        stack.engineUrl,
        "--model",
        stack.model,
        "--work-root",
        join(stack.root, "work", `refused-${nodeId}`),
      ],
      { cwd: REPO_ROOT, env: { POLAR_GATEWAY_TOKEN: token, NO_COLOR: "1" }, reject: false, timeout: 60_000 },
    );

  it("a per-gateway token of another node: close 4403, exit 78 with the dispatcher's reason", async () => {
    const made = createToken("gateway", "gpu-a");
    const res = await fetch(`${stack.controlPlane.url}/v1/admin/gateway_tokens`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.tokens.admin}`, "content-type": "application/json" },
      body: JSON.stringify({ node_id: "gpu-a", sha256: made.sha256 }),
    });
    expect(res.status).toBe(201);
    const run = await serve(made.token, "gpu-b");
    expect(run.exitCode).toBe(78);
    expect(run.stderr).toContain(
      "close 4403 (its token belongs to another node): node_id_mismatch: this token belongs to node 'gpu-a', not 'gpu-b'",
    );
    expect(run.stderr).toContain("Fix: start the gateway with the --node-id");
  });

  it("a token the control plane does not know: HTTP 401, exit 78 naming POLAR_GATEWAY_TOKEN", async () => {
    const run = await serve("not-a-gateway-token", "gpu-c");
    expect(run.exitCode).toBe(78);
    expect(run.stderr).toContain("refused this gateway for good: HTTP 401");
    expect(run.stderr).toContain("Fix: set POLAR_GATEWAY_TOKEN");
  });
});
