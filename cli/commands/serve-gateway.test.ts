import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeControlPlane } from "../../gateway-agent/testing/fake-control-plane";
import { ASK, isResultOf, makeAssign } from "../../gateway-agent/testing/session-fixtures";
import { loadTopology, parseTopology } from "../../gateway-agent/topology";
import { WIRE_VERSION } from "../../protocol";
import { type SimEngineHandle, startSimEngine } from "../../sim/server";
import { MISTRAL_LIKE_TEMPLATE, modelFolderWith } from "../../tokenizer/test-folder";
import { UsageError } from "../usage-error";
import { REPO_ROOT } from "../wrangler-dev";
import { resolveServeGatewayOptions, startServeGateway } from "./serve-gateway";

const TOKEN = "topology-test-token";
let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), "polar-topology-test-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

const minimal = (extra = "") => `
gateway:
  control_plane_url: http://127.0.0.1:8787/
  nodes:
    - id: gpu-0
      model_served: Qwen/Qwen3-8B
      inference: { engine: sglang, base_url: "http://127.0.0.1:30000" }${extra}
`;

describe("topology.yaml", () => {
  it("maps upstream keys onto the gateway's options", async () => {
    const text = `
rollout: { host: 0.0.0.0, port: 8080, public_url: "http://cp.internal:8080" }
gateway:
  heartbeat_interval_seconds: 30
  completion_persistence: { enabled: true, max_field_bytes: 1048576, queue_size: 1024 }
  nodes:
    - id: a
      host: 127.0.0.1
      port: 8100
      model_served: M
      inference: { engine: sglang, base_url: "http://127.0.0.1:8000" }
      max_init_workers: 8
      max_run_workers: 3
      max_postrun_workers: 5
      default_runtime: { backend: docker, image: "img:1" }
    - id: b
      model_served: M
      inference: { engine: vllm, base_url: "http://127.0.0.1:8001" }
`;
    expect(parseTopology(text, "t.yaml").gateway.nodes).toHaveLength(2);
    const file = path.join(scratch, "upstream.yaml");
    await writeFile(file, text);
    const a = resolveServeGatewayOptions({ config: file, nodeId: "a" }, TOKEN);
    expect(a).toMatchObject({
      controlPlaneUrl: "http://cp.internal:8080", // rollout.public_url, as upstream's rollout_server_url default
      nodeId: "a",
      engine: "sglang", // upstream's 'sglang' is the token mode
      engineUrl: "http://127.0.0.1:8000",
      model: "M",
      maxInit: 8,
      maxRun: 3,
      maxPostrun: 5,
      http: { host: "127.0.0.1", port: 8100 },
      defaultRuntime: { backend: "docker", image: "img:1", allow_internet: true },
    });
    // The flags-only form still names what is missing.
    expect(() => resolveServeGatewayOptions({}, TOKEN)).toThrow(/--control-plane is required/);
    expect(
      resolveServeGatewayOptions(
        { controlPlane: "http://x:1", nodeId: "n", engineUrl: "http://e:1", model: "m" },
        TOKEN,
      ),
    ).toMatchObject({ controlPlaneUrl: "http://x:1", engine: "sglang-openai" });
  });

  it("link flags: journal bound, dial timeout and reconnect cap reach the gateway; bad values name the flag", () => {
    const base = { controlPlane: "http://x:1", nodeId: "n", engineUrl: "http://e:1", model: "m" };
    expect(
      resolveServeGatewayOptions(
        { ...base, journalMaxMb: 64, connectTimeoutSeconds: 2.5, reconnectMaxSeconds: 0.2 },
        TOKEN,
      ),
    ).toMatchObject({
      journalMaxBytes: 64 * 1024 * 1024,
      connectTimeoutMs: 2500,
      reconnect: { initialDelayMs: 200, maxDelayMs: 200 },
    });
    expect(resolveServeGatewayOptions({ ...base, reconnectMaxSeconds: 4 }, TOKEN).reconnect).toEqual({
      initialDelayMs: 500,
      maxDelayMs: 4000,
    });
    // The min_policy_version bound: seconds, 0 = fail at once; unset leaves the proxy's default.
    expect(resolveServeGatewayOptions({ ...base, policyVersionWait: 2.5 }, TOKEN).policyVersionWaitMs).toBe(
      2500,
    );
    expect(resolveServeGatewayOptions({ ...base, policyVersionWait: 0 }, TOKEN).policyVersionWaitMs).toBe(0);
    expect(resolveServeGatewayOptions(base, TOKEN)).not.toHaveProperty("policyVersionWaitMs");
    expect(() => resolveServeGatewayOptions({ ...base, policyVersionWait: -1 }, TOKEN)).toThrow(
      /^--policy-version-wait: must be a number of seconds >= 0/,
    );
    for (const [key, flag] of [
      ["journalMaxMb", "--journal-max-mb"],
      ["connectTimeoutSeconds", "--connect-timeout-seconds"],
      ["reconnectMaxSeconds", "--reconnect-max-seconds"],
    ] as const) {
      expect(() => resolveServeGatewayOptions({ ...base, [key]: 0 }, TOKEN)).toThrow(
        new RegExp(`^${flag}: must be a number > 0`),
      );
    }
  });

  it("rejects unknown keys, bad values, duplicate ids and unset variables, naming the key", () => {
    expect(() => parseTopology(minimal("\n      max_run_wrokers: 2"), "t.yaml")).toThrow(
      /t\.yaml: gateway\.nodes\[0\]: .*'max_run_wrokers'/,
    );
    expect(() => parseTopology(minimal("\n      max_run_workers: 0"), "t.yaml")).toThrow(
      /gateway\.nodes\[0\]\.max_run_workers/,
    );
    expect(() => parseTopology(minimal().replace("http://127.0.0.1:30000", "ftp://x"), "t.yaml")).toThrow(
      /gateway\.nodes\[0\]\.inference\.base_url: must be an http\(s\) URL/,
    );
    expect(() =>
      parseTopology(
        `${minimal()}    - id: gpu-0\n      model_served: M\n      inference: { base_url: "http://e:1" }\n`,
        "t.yaml",
      ),
    ).toThrow(/gateway\.nodes\[1\]\.id: duplicate node id 'gpu-0'/);
    expect(() =>
      parseTopology(minimal().replace("http://127.0.0.1:8787/", `\${NO_SUCH_VAR_POLAR}`), "t.yaml", {}),
    ).toThrow(/gateway\.control_plane_url: environment variable NO_SUCH_VAR_POLAR is not set/);
    expect(() => parseTopology("gateway: [", "t.yaml")).toThrow(/t\.yaml: not valid YAML/);
  });

  it("chooses the node by --node-id (required with several), lets flags override, names bad choices", async () => {
    const file = path.join(scratch, "two.yaml");
    await writeFile(
      file,
      `${minimal()}    - id: gpu-1\n      model_served: M2\n      inference: { engine: vllm, base_url: "http://127.0.0.1:30001" }\n`,
    );
    expect(() => resolveServeGatewayOptions({ config: file }, TOKEN)).toThrow(
      /2 nodes: choose one with --node-id/,
    );
    expect(() => resolveServeGatewayOptions({ config: file, nodeId: "gpu-9" }, TOKEN)).toThrow(
      /--node-id: 'gpu-9' is not in/,
    );
    const one = resolveServeGatewayOptions({ config: file, nodeId: "gpu-1", maxRun: 7 }, TOKEN);
    expect(one).toMatchObject({
      controlPlaneUrl: "http://127.0.0.1:8787",
      nodeId: "gpu-1",
      engine: "vllm",
      engineUrl: "http://127.0.0.1:30001",
      model: "M2",
      maxRun: 7,
      maxInit: 4,
    });
    const bad = path.join(scratch, "bad-engine.yaml");
    await writeFile(bad, minimal().replace("engine: sglang", "engine: tgi"));
    expect(() => resolveServeGatewayOptions({ config: bad }, TOKEN)).toThrow(UsageError);
    expect(() => resolveServeGatewayOptions({ config: bad }, TOKEN)).toThrow(/inference\.engine.*'tgi'/);
    expect(() => resolveServeGatewayOptions({ config: path.join(scratch, "missing.yaml") }, TOKEN)).toThrow(
      /-c: cannot read/,
    );
  });

  it("token mode: inference.* token keys and flags pass through; misplaced ones are named", async () => {
    const file = path.join(scratch, "token.yaml");
    await writeFile(
      file,
      minimal().replace(
        `inference: { engine: sglang, base_url: "http://127.0.0.1:30000" }`,
        `inference:
        engine: sglang
        base_url: "http://127.0.0.1:30000"
        tokenizer_path: models/Qwen3-8B
        tool_call_parser: qwen3_coder
        reasoning_parser: qwen3
        context_length: 32768
        on_template_mismatch: new_chain
        delegate_parsing: true`,
      ),
    );
    expect(resolveServeGatewayOptions({ config: file }, TOKEN)).toMatchObject({
      engine: "sglang",
      tokenizerPath: "models/Qwen3-8B",
      toolCallParser: "qwen3_coder",
      reasoningParser: "qwen3",
      contextLength: 32768,
      onTemplateMismatch: "new_chain",
      delegateParsing: true,
    });
    // Flags override the file.
    expect(
      resolveServeGatewayOptions({ config: file, toolCallParser: "hermes", contextLength: "4096" }, TOKEN),
    ).toMatchObject({ toolCallParser: "hermes", contextLength: 4096 });
    // A token-mode key under a chat engine is a mistake, named by key (file) or flag.
    expect(() => resolveServeGatewayOptions({ config: file, engine: "vllm" }, TOKEN)).toThrow(
      /--tool-call-parser \(or gateway\.nodes\[\]\.inference\.tool_call_parser in .*token\.yaml\): only applies to --engine sglang/,
    );
    const chat = path.join(scratch, "chat-token-key.yaml");
    await writeFile(chat, minimal().replace("engine: sglang,", "engine: vllm, context_length: 9,"));
    expect(() => resolveServeGatewayOptions({ config: chat }, TOKEN)).toThrow(
      /gateway\.nodes\[0\]\.inference\.context_length: only applies to engine 'sglang'/,
    );
    const flags = { controlPlane: "http://x:1", nodeId: "n", engineUrl: "http://e:1", model: "m" };
    expect(
      resolveServeGatewayOptions(
        { ...flags, engine: "sglang", tokenizerPath: "tok", reasoningParser: "none" },
        TOKEN,
      ),
    ).toMatchObject({ engine: "sglang", tokenizerPath: "tok", reasoningParser: "none" });
    // The tokenizer folder is also the chat engines' exact count_tokens source: allowed.
    expect(resolveServeGatewayOptions({ ...flags, tokenizerPath: "tok" }, TOKEN)).toMatchObject({
      engine: "sglang-openai",
      tokenizerPath: "tok",
    });
    expect(() => resolveServeGatewayOptions({ ...flags, toolCallParser: "qwen3" }, TOKEN)).toThrow(
      /^--tool-call-parser: only applies to --engine sglang \(token mode\), not 'sglang-openai'$/,
    );
    expect(() =>
      resolveServeGatewayOptions({ ...flags, engine: "sglang", contextLength: "x" }, TOKEN),
    ).toThrow(/--context-length: must be an integer >= 2, got 'x'/);
    expect(() =>
      resolveServeGatewayOptions({ ...flags, engine: "sglang", onTemplateMismatch: "drop" }, TOKEN),
    ).toThrow(/--on-template-mismatch: 'drop' is not one of bridge, new_chain/);
    expect(
      resolveServeGatewayOptions({ ...flags, engine: "sglang", routedExperts: "4:2" }, TOKEN),
    ).toMatchObject({ routedExperts: { layers: 4, topK: 2 } });
    expect(() =>
      resolveServeGatewayOptions({ ...flags, engine: "sglang", routedExperts: "4x2" }, TOKEN),
    ).toThrow(/^--routed-experts: '4x2' is not LAYERS:TOP_K/);
    await writeFile(
      chat,
      minimal().replace("engine: sglang,", "engine: sglang, routed_experts: {layers: 48, top_k: 8},"),
    );
    expect(resolveServeGatewayOptions({ config: chat }, TOKEN)).toMatchObject({
      routedExperts: { layers: 48, topK: 8 },
    });
  });

  it("token-mode start-up failures name the flag", async () => {
    process.env.POLAR_GATEWAY_TOKEN = TOKEN;
    const flags = {
      controlPlane: "http://127.0.0.1:9",
      nodeId: "n",
      engine: "sglang",
      engineUrl: "http://127.0.0.1:9",
      model: "m",
      workRoot: path.join(scratch, "work-bad"),
    };
    try {
      await expect(
        startServeGateway(
          { ...flags, tokenizerPath: path.join(scratch, "no-such-dir") },
          { installSignalHandlers: false },
        ),
      ).rejects.toThrow(/^--tokenizer-path: /);
      await expect(
        startServeGateway({ ...flags, toolCallParser: "nope" }, { installSignalHandlers: false }),
      ).rejects.toThrow(/^--tool-call-parser: .*nope/);
      await expect(
        startServeGateway({ ...flags, modelFamily: "llama" }, { installSignalHandlers: false }),
      ).rejects.toThrow(/^--model-family: .*"llama" \(known: qwen3, deepseek_v3\)/);
      await expect(
        startServeGateway(
          { ...flags, chatTemplate: path.join(scratch, "no-such.jinja") },
          { installSignalHandlers: false },
        ),
      ).rejects.toThrow(/^--chat-template: cannot read the chat template .*no-such\.jinja/);
      // Any model folder: a template feature the renderer lacks, and a format Polar-TS does not
      // parse with no parser named (the engine cannot be asked here), each name their flag.
      const unsupported = modelFolderWith(
        MISTRAL_LIKE_TEMPLATE.replace("{{- eos_token -}}", "{%- do x -%}{{- eos_token -}}"),
      );
      await expect(
        startServeGateway({ ...flags, tokenizerPath: unsupported }, { installSignalHandlers: false }),
      ).rejects.toThrow(/^--tokenizer-path: the chat template .*chat_template\.jinja uses tag \{% do %\}/);
      await expect(
        startServeGateway(
          { ...flags, tokenizerPath: modelFolderWith(MISTRAL_LIKE_TEMPLATE) },
          { installSignalHandlers: false },
        ),
      ).rejects.toThrow(/^--tool-call-parser: .*is not a format Polar-TS parses/);
    } finally {
      delete process.env.POLAR_GATEWAY_TOKEN;
    }
  });

  it("the example topology parses", () => {
    const t = loadTopology(path.join(import.meta.dirname, "..", "..", "examples", "topology.yaml"), {
      POLAR_URL: "http://127.0.0.1:8787",
    });
    expect(t.gateway.nodes[0]).toMatchObject({ id: "gpu-0", max_run_workers: 4 });
  });
});

describe("serve_gateway -c: health, metrics, structured logs", { timeout: 60_000 }, () => {
  // `engine: sglang` is the token mode: the proxy calls the simulated engine's `/generate` with ids.
  let engine: SimEngineHandle;
  beforeAll(async () => {
    engine = await startSimEngine({ model: "Qwen/Qwen3-8B" });
  });
  afterAll(async () => {
    await engine.close();
  });

  it("runs from a topology file and serves /health and Prometheus /metrics", async () => {
    const cp = await startFakeControlPlane({ token: TOKEN });
    const file = path.join(scratch, "run.yaml");
    await writeFile(
      file,
      `gateway:
  control_plane_url: \${TEST_CP_URL}
  work_root: ${JSON.stringify(path.join(scratch, "work"))}
  runtimes: { local: { sandbox: never } }
  nodes:
    - id: topo-node
      host: 127.0.0.1
      port: 0
      model_served: Qwen/Qwen3-8B
      inference: { engine: sglang, base_url: "${engine.url}" }
      max_init_workers: 2
      max_run_workers: 1
      max_postrun_workers: 1
`,
    );
    process.env.POLAR_GATEWAY_TOKEN = TOKEN;
    process.env.TEST_CP_URL = cp.url;
    const lines: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    }) as typeof process.stderr.write;
    let gateway: Awaited<ReturnType<typeof startServeGateway>> | null = null;
    try {
      gateway = await startServeGateway({ config: file }, { installSignalHandlers: false });
      const hello = await cp.waitFor((m) => m.type === "hello");
      expect(hello).toMatchObject({
        node_id: "topo-node",
        capacity: { max_init: 2, max_run: 1, max_postrun: 1 },
        credit: 3,
      });
      const a = makeAssign({ command: ASK });
      cp.send(a);
      const { result } = await cp.waitFor(isResultOf(a.lease_id));
      expect(result.status).toBe("COMPLETED");
      // Token mode: one bridged turn, counted in the trajectory's metadata (the proxy forgets the
      // session on close, so the gateway reads the counts before).
      expect(result.trajectory.metadata.bridge_verdicts).toEqual({
        extended: 0,
        template_mismatch: 0,
        new_chain: 1,
        compacted: 0,
        history_rewritten: 0,
      });
      expect(result.trajectory.metadata.bridge_flags).toEqual({
        reasoning_dropped: 0,
        image_prompt_unverified: 0,
      });

      // A client that sends its replies back without their reasoning: each later turn is flagged,
      // in the trajectory's metadata and on /metrics, per harness and model.
      const repo = path.join(import.meta.dirname, "..", "..");
      const dropping = makeAssign({
        command: `${path.join(repo, "node_modules", ".bin", "tsx")} ${path.join(repo, "examples", "conformance", "scripted-client.ts")}`,
        env: { CONFORMANCE_REASONING: "drop" },
      });
      cp.send(dropping);
      const second = (await cp.waitFor(isResultOf(dropping.lease_id))).result;
      expect(second.status).toBe("COMPLETED");
      expect(second.trajectory.metadata.bridge_flags).toEqual({
        reasoning_dropped: 3,
        image_prompt_unverified: 0,
      });

      const health = await (await fetch(`${gateway.httpUrl}/health`)).json();
      expect(health).toMatchObject({ status: "ok", node_id: "topo-node", connected: true, run_inflight: 0 });
      const res = await fetch(`${gateway.httpUrl}/metrics`);
      expect(res.headers.get("content-type")).toContain("text/plain");
      const text = await res.text();
      expect(text).toContain('polar_gateway_stage_sessions{stage="ready",node_id="topo-node"} 0');
      expect(text).toContain('polar_gateway_results_total{status="COMPLETED",node_id="topo-node"} 2');
      expect(text).toContain("polar_gateway_run_start_seconds_count");
      expect(text).toContain('polar_gateway_connected{node_id="topo-node"} 1');
      // Tallied under the session's harness (`shell`, passed in the session meta) and the model.
      expect(text).toContain(
        'polar_bridge_turns_total{harness="shell",model="Qwen/Qwen3-8B",verdict="new_chain",node_id="topo-node"} 2',
      );
      expect(text).toContain(
        'polar_bridge_flagged_turns_total{harness="shell",model="Qwen/Qwen3-8B",flag="reasoning_dropped",node_id="topo-node"} 3',
      );
      expect((await fetch(`${gateway.httpUrl}/nope`)).status).toBe(404);
    } finally {
      process.stderr.write = write;
      await gateway?.stop();
      await cp.close();
      delete process.env.TEST_CP_URL;
      delete process.env.POLAR_GATEWAY_TOKEN;
    }
    const logs = lines
      .join("")
      .trim()
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(logs.find((l) => l.msg === "gateway started")).toMatchObject({
      level: "info",
      node_id: "topo-node",
      component: "gateway",
    });
  });
});

describe("polar serve_gateway refused by the control plane", { timeout: 60_000 }, () => {
  /** The real command as a child process, against `cpUrl`; resolves with how it ended. */
  function serve(cpUrl: string, token: string, nodeId: string) {
    return execa(
      process.execPath,
      [
        path.join(REPO_ROOT, "bin", "polar.mjs"),
        "serve_gateway",
        "--control-plane",
        cpUrl,
        "--node-id",
        nodeId,
        "--engine-url",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--work-root",
        path.join(scratch, `work-${nodeId}`),
      ],
      { cwd: REPO_ROOT, env: { POLAR_GATEWAY_TOKEN: token, NO_COLOR: "1" }, reject: false, timeout: 45_000 },
    );
  }

  it("exits 78 naming the cause and the fix on a token the control plane does not accept (HTTP 401)", async () => {
    const cp = await startFakeControlPlane({ token: TOKEN });
    try {
      const run = await serve(cp.url, "not-the-token", "gpu-401");
      expect(run.exitCode).toBe(78);
      expect(run.stderr).toContain("polar: the control plane refused this gateway for good: HTTP 401");
      expect(run.stderr).toContain("Fix: set POLAR_GATEWAY_TOKEN");
      expect(cp.upgrades).toHaveLength(1); // no retry loop
    } finally {
      await cp.close();
    }
  });

  it("exits 78 on close 4403 (a per-gateway token of another node), with the control plane's words", async () => {
    const cp = await startFakeControlPlane({ token: TOKEN });
    try {
      const run = serve(cp.url, TOKEN, "gpu-b");
      // What the dispatcher does with a token bound to gpu-a (control-plane/queue/handshake.ts).
      await cp.waitFor((m) => m.type === "hello");
      cp.send({
        v: WIRE_VERSION,
        type: "error",
        code: "node_id_mismatch",
        message: "this token belongs to node 'gpu-a', not 'gpu-b'",
      });
      cp.closeWith(4403, "node_id_mismatch");
      const done = await run;
      expect(done.exitCode).toBe(78);
      expect(done.stderr).toContain(
        "polar: the control plane refused this gateway for good: close 4403 (its token belongs to another node): node_id_mismatch: this token belongs to node 'gpu-a', not 'gpu-b'. Fix: start the gateway with the --node-id",
      );
      // Logged at error level too (text logs without -c).
      expect(done.stderr).toMatch(
        /\[gateway\] control plane refused this gateway for good; not reconnecting/,
      );
    } finally {
      await cp.close();
    }
  });
});
