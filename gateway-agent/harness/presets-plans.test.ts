/**
 * Every preset's whole plan for one fixed session, spelled out: the exact install command, config
 * files (byte for byte), environment (in order), command line, postprocess and uploads. The other
 * preset tests check what each field means; this one pins what each preset produces, so a change
 * to the shared builders shows up as the preset whose output moved.
 */
import { describe, expect, it } from "vitest";
import { planContextFor } from "../testing/plan-context";
import type { HarnessPlan } from "./plan";
import { PRESET_ENTRIES } from "./preset-table";
import { PRESETS, type PresetName } from "./presets";

const ctxFor = planContextFor;

const HOME = "/polar/session/home";
const M = "Qwen/Qwen3-8B";
const V1 = "http://127.0.0.1:4100/v1";
const KEY = "sk-polar-0123";
const I = '"$(cat "$POLAR_INSTRUCTION_FILE")"';
const json = (v: unknown) => JSON.stringify(v, null, 2);
const npm = (bin: string, pkg: string) =>
  `command -v ${bin} >/dev/null 2>&1 || npm install -g --no-audit --no-fund ${pkg}`;
const tee = (name: string, cli: string) =>
  `set -o pipefail; ${cli} 2>&1 | tee -a "$AGENT_LOG_DIR/${name}.txt"`;
/** The `extra_args` of the settings case, as each command line carries them. */
const EXTRA = `'--x' 'a b' 'it'\\''s'`;
const planOf = (name: PresetName, agent?: Record<string, unknown>) =>
  PRESETS[name](ctxFor(name, agent)) as HarnessPlan & Record<string, unknown>;

const OPENCODE_PROVIDER = {
  npm: "@ai-sdk/openai-compatible",
  name: "Polar proxy",
  options: { baseURL: V1, apiKey: KEY },
  models: { [M]: {} },
};
const CODEX_TOML = `model = "${M}"
model_provider = "polar"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.polar]
name = "Polar proxy"
base_url = "${V1}"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
`;
const CLAUDE_ENV = {
  CLAUDE_CONFIG_DIR: `${HOME}/.claude`,
  IS_SANDBOX: "1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1",
  ANTHROPIC_MODEL: M,
  ANTHROPIC_SMALL_FAST_MODEL: M,
  ANTHROPIC_DEFAULT_OPUS_MODEL: M,
  ANTHROPIC_DEFAULT_SONNET_MODEL: M,
  ANTHROPIC_DEFAULT_HAIKU_MODEL: M,
};
const CLAUDE_CMD = `claude -p ${I} --output-format=stream-json --verbose --dangerously-skip-permissions --model '${M}'`;
const CODEX_CMD = "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox";
const CODEX_POST = [
  { command: `cp -r "$CODEX_HOME/sessions" "$AGENT_LOG_DIR/codex-sessions" 2>/dev/null || true` },
];
const QWEN_SETTINGS = {
  $version: 4,
  general: { enableAutoUpdate: false },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
};
const GEMINI_SETTINGS = {
  security: { auth: { selectedType: "gemini-api-key" } },
  general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
  privacy: { usageStatisticsEnabled: false },
  telemetry: { enabled: false },
};
const OPENCODE_ENV = {
  OPENCODE_CONFIG: `${HOME}/.config/opencode/opencode.json`,
  XDG_CONFIG_HOME: `${HOME}/.config`,
  XDG_DATA_HOME: `${HOME}/.local/share`,
  XDG_CACHE_HOME: `${HOME}/.cache`,
  OPENCODE_DISABLE_AUTOUPDATE: "1",
  OPENCODE_DISABLE_MODELS_FETCH: "1",
  OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
  OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
  OPENCODE_DISABLE_SHARE: "1",
};
const copilotEnv = (wire: Record<string, string>) => ({
  COPILOT_OFFLINE: "true",
  COPILOT_AUTO_UPDATE: "false",
  COPILOT_HOME: `${HOME}/.copilot`,
  ...wire,
  COPILOT_PROVIDER_API_KEY: KEY,
  COPILOT_MODEL: M,
  COPILOT_ALLOW_ALL: "true",
});
const continueYaml = (provider: string, apiBase: string) => `name: polar
version: 1.0.0
schema: v1
models:
  - name: polar
    provider: ${provider}
    model: ${M}
    apiBase: ${apiBase}
    apiKey: ${KEY}
    roles:
      - chat
      - edit
      - apply
`;
const CONTINUE_ENV = {
  CONTINUE_GLOBAL_DIR: `${HOME}/.continue`,
  CONTINUE_CLI_ENABLE_TELEMETRY: "0",
  CONTINUE_METRICS_ENABLED: "0",
  CONTINUE_CLI_AUTO_UPDATED: "1",
};
const CONTINUE_CMD = `cn -p --auto --config '${HOME}/.continue/polar.yaml'`;

/** Each preset's plan for the fixed session with no settings. */
const DEFAULT_PLANS: Record<PresetName, Record<string, unknown>> = {
  claude_code: {
    name: "claude_code",
    install: npm("claude", "@anthropic-ai/claude-code@2.1.197"),
    postprocess: [],
    files: [],
    env: CLAUDE_ENV,
    uploads: [],
    steps: [{ command: tee("claude_code", CLAUDE_CMD) }],
  },
  codex: {
    name: "codex",
    install: npm("codex", "@openai/codex@0.171.0"),
    postprocess: CODEX_POST,
    files: [{ path: `${HOME}/.codex/config.toml`, content: CODEX_TOML }],
    env: { CODEX_HOME: `${HOME}/.codex` },
    uploads: [],
    steps: [{ command: tee("codex", `${CODEX_CMD} ${I}`) }],
  },
  qwen_code: {
    name: "qwen_code",
    install: npm("qwen", "@qwen-code/qwen-code@0.15.10"),
    postprocess: [],
    files: [{ path: `${HOME}/.qwen/settings.json`, content: json(QWEN_SETTINGS) }],
    env: { QWEN_CODE_NO_RELAUNCH: "true", QWEN_CODE_DISABLE_PRECONNECT: "1" },
    steps: [{ command: tee("qwen_code", `qwen -p ${I} --yolo --auth-type openai -m '${M}'`) }],
  },
  opencode: {
    name: "opencode",
    install: npm("opencode", "opencode-ai@1.18.33"),
    postprocess: [],
    files: [
      {
        path: `${HOME}/.config/opencode/opencode.json`,
        content: json({
          $schema: "https://opencode.ai/config.json",
          provider: { polar: OPENCODE_PROVIDER },
          model: `polar/${M}`,
          autoupdate: false,
          share: "disabled",
        }),
      },
    ],
    env: OPENCODE_ENV,
    steps: [{ command: tee("opencode", `opencode run ${I}`) }],
  },
  gemini_cli: {
    name: "gemini_cli",
    install: npm("gemini", "@google/gemini-cli@0.61.0"),
    postprocess: [],
    files: [{ path: `${HOME}/.gemini/settings.json`, content: json(GEMINI_SETTINGS) }],
    env: { GEMINI_MODEL: M, GEMINI_CLI_NO_RELAUNCH: "true", GEMINI_CLI_TRUST_WORKSPACE: "true" },
    steps: [{ command: tee("gemini_cli", `gemini -p ${I} --yolo -m '${M}'`) }],
  },
  pi: {
    name: "pi",
    install: npm("pi", "@mariozechner/pi-coding-agent@0.73.1"),
    postprocess: [],
    files: [
      {
        path: `${HOME}/.pi/agent/models.json`,
        content: json({
          providers: {
            polar: { baseUrl: V1, api: "openai-completions", apiKey: KEY, models: [{ id: M }] },
          },
        }),
      },
    ],
    env: { PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0" },
    steps: [{ command: tee("pi", `pi --provider polar --model '${M}' -p ${I} --no-session`) }],
  },
  mini_swe_agent: {
    name: "mini_swe_agent",
    install: "command -v mini >/dev/null 2>&1 || pip install --no-input mini-swe-agent==2.4.2",
    postprocess: [],
    files: [],
    env: { MSWEA_CONFIGURED: "true", MSWEA_COST_TRACKING: "ignore_errors" },
    steps: [
      {
        command: tee(
          "mini_swe_agent",
          `mini -y --exit-immediately -m 'openai/${M}' -t ${I} -o "$AGENT_LOG_DIR/mini_swe_agent.traj.json"`,
        ),
      },
    ],
  },
  copilot_cli: {
    name: "copilot_cli",
    install: npm("copilot", "@github/copilot@1.0.102"),
    postprocess: [],
    files: [],
    env: copilotEnv({
      COPILOT_PROVIDER_TYPE: "openai",
      COPILOT_PROVIDER_BASE_URL: V1,
      COPILOT_PROVIDER_WIRE_API: "responses",
    }),
    steps: [{ command: tee("copilot_cli", `copilot -p ${I} --yolo --no-auto-update --model '${M}'`) }],
  },
  cline: {
    name: "cline",
    install: npm("cline", "cline@3.0.65"),
    postprocess: [],
    files: [
      {
        path: `${HOME}/.cline/data/settings/global-settings.json`,
        content: json({ telemetryOptOut: true, autoUpdateEnabled: false }),
      },
    ],
    env: { CLINE_NO_AUTO_UPDATE: "1", CLINE_DIR: `${HOME}/.cline` },
    steps: [
      {
        command: tee(
          "cline",
          `cline auth -p openai -k '${KEY}' -m '${M}' -b '${V1}' && cline --json -P openai -m '${M}' -k '${KEY}' ${I}`,
        ),
      },
    ],
  },
  kilo_code: {
    name: "kilo_code",
    install: npm("kilo", "@kilocode/cli@7.7.7"),
    postprocess: [],
    files: [
      {
        path: `${HOME}/.config/kilo/kilo.json`,
        content: json({
          provider: { polar: OPENCODE_PROVIDER },
          model: `polar/${M}`,
          autoupdate: false,
          share: "disabled",
          snapshot: false,
        }),
      },
    ],
    env: {
      KILO_CONFIG: `${HOME}/.config/kilo/kilo.json`,
      XDG_CONFIG_HOME: `${HOME}/.config`,
      XDG_DATA_HOME: `${HOME}/.local/share`,
      XDG_CACHE_HOME: `${HOME}/.cache`,
      XDG_STATE_HOME: `${HOME}/.local/state`,
      KILO_DISABLE_AUTOUPDATE: "1",
      KILO_DISABLE_MODELS_FETCH: "1",
      KILO_DISABLE_LSP_DOWNLOAD: "1",
      KILO_DISABLE_DEFAULT_PLUGINS: "1",
      KILO_DISABLE_SHARE: "1",
      KILO_DISABLE_SESSION_INGEST: "1",
      KILO_DISABLE_PRESENCE: "1",
      KILO_TELEMETRY_LEVEL: "off",
    },
    steps: [{ command: tee("kilo_code", `kilo run --auto -m 'polar/${M}' ${I}`) }],
  },
  continue: {
    name: "continue",
    install: npm("cn", "@continuedev/cli@1.5.47"),
    postprocess: [],
    files: [{ path: `${HOME}/.continue/polar.yaml`, content: continueYaml("openai", V1) }],
    env: CONTINUE_ENV,
    steps: [{ command: tee("continue", `${CONTINUE_CMD} ${I}`) }],
  },
  grok_cli: {
    name: "grok_cli",
    install: npm("grok", "@vibe-kit/grok-cli@0.0.34"),
    postprocess: [],
    files: [],
    env: { GROK_BASE_URL: V1, GROK_API_KEY: KEY, GROK_MODEL: M },
    steps: [{ command: tee("grok_cli", `grok -d "$PWD" -u '${V1}' -k "$GROK_API_KEY" -m '${M}' -p ${I}`) }],
  },
  nanocoder: {
    name: "nanocoder",
    install: npm("nanocoder", "@nanocollective/nanocoder@1.30.0"),
    postprocess: [],
    files: [
      {
        path: `${HOME}/.config/nanocoder/agents.config.json`,
        content: json({
          nanocoder: { providers: [{ name: "polar", baseUrl: V1, apiKey: KEY, models: [M] }] },
        }),
      },
      {
        path: `${HOME}/.config/nanocoder/nanocoder-preferences.json`,
        content: json({ trustedDirectories: ["/testbed"] }),
      },
    ],
    env: {
      NANOCODER_CONFIG_DIR: `${HOME}/.config/nanocoder`,
      NANOCODER_DATA_DIR: `${HOME}/.local/share/nanocoder`,
      NANOCODER_CONTEXT_LIMIT: "40960",
    },
    steps: [
      {
        command: tee("nanocoder", `nanocoder --provider polar --model '${M}' --mode yolo --plain run ${I}`),
      },
    ],
  },
};

/** Each preset's command line with `extra_args` (where they go differs per CLI). */
const EXTRA_COMMANDS: Record<PresetName, string> = {
  claude_code: `${CLAUDE_CMD} ${EXTRA}`,
  codex: `${CODEX_CMD} ${EXTRA} ${I}`,
  qwen_code: `qwen -p ${I} --yolo --auth-type openai -m '${M}' ${EXTRA}`,
  opencode: `opencode run ${EXTRA} ${I}`,
  gemini_cli: `gemini -p ${I} --yolo -m '${M}' ${EXTRA}`,
  pi: `pi --provider polar --model '${M}' -p ${I} --no-session ${EXTRA}`,
  mini_swe_agent: `mini -y --exit-immediately -m 'openai/${M}' -t ${I} -o "$AGENT_LOG_DIR/mini_swe_agent.traj.json" ${EXTRA}`,
  copilot_cli: `copilot -p ${I} --yolo --no-auto-update --model '${M}' ${EXTRA}`,
  cline: `cline auth -p openai -k '${KEY}' -m '${M}' -b '${V1}' && cline --json -P openai -m '${M}' -k '${KEY}' ${EXTRA} ${I}`,
  kilo_code: `kilo run --auto -m 'polar/${M}' ${EXTRA} ${I}`,
  continue: `${CONTINUE_CMD} ${EXTRA} ${I}`,
  grok_cli: `grok -d "$PWD" -u '${V1}' -k "$GROK_API_KEY" -m '${M}' ${EXTRA} -p ${I}`,
  nanocoder: `nanocoder --provider polar --model '${M}' --mode yolo --plain ${EXTRA} run ${I}`,
};

const names = Object.keys(PRESETS) as PresetName[];
const MCP = [
  { name: "files", transport: "stdio", command: "mcp-files", args: ["--root", "/testbed"] },
  { name: "web", transport: "sse", url: "http://127.0.0.1:9/sse" },
  { name: "h", transport: "streamable-http", url: "http://127.0.0.1:9/mcp" },
];
const JSON_MCP = (httpKey: string) => ({
  files: { command: "mcp-files", args: ["--root", "/testbed"] },
  web: { type: "sse", url: "http://127.0.0.1:9/sse" },
  h: { type: "http", [httpKey]: "http://127.0.0.1:9/mcp" },
});

describe("each preset's whole plan", () => {
  it.each(names)("%s: install, files, env, command, postprocess and uploads, exactly", (name) => {
    const plan = planOf(name);
    expect(plan).toStrictEqual(DEFAULT_PLANS[name]);
    // Same order of variables too: a later one of the same name would win in the sandbox.
    expect(Object.keys(plan.env)).toEqual(Object.keys(DEFAULT_PLANS[name].env as object));
  });

  it.each(names)("%s: extra_args and a version in the command line and install step", (name) => {
    const plan = planOf(name, { settings: { version: "9.9.9", extra_args: ["--x", "a b", "it's"] } });
    expect(plan.steps).toEqual([{ command: tee(name, EXTRA_COMMANDS[name]) }]);
    expect(plan.install).toBe(
      (DEFAULT_PLANS[name].install as string).replace(/[@=]{1,2}[0-9][0-9.]*$/, (m) =>
        m.startsWith("==") ? "==9.9.9" : "@9.9.9",
      ),
    );
    expect(planOf(name, { settings: { install: false } }).install).toBeNull();
  });

  it("claude_code: flags and the MCP file in its config folder", () => {
    const plan = planOf("claude_code", {
      settings: { max_turns: 7, allowed_tools: ["Bash", "Edit"] },
      mcp_servers: MCP,
    });
    const file = `${HOME}/.claude/polar-mcp.json`;
    expect(plan.files).toStrictEqual([{ path: file, content: json({ mcpServers: JSON_MCP("url") }) }]);
    expect(plan.steps).toEqual([
      {
        command: tee(
          "claude_code",
          `${CLAUDE_CMD} --max-turns 7 --allowedTools 'Bash,Edit' --mcp-config '${file}'`,
        ),
      },
    ]);
  });

  it("claude_code, codex: skills uploaded into the config folder", () => {
    const skills = { skills_path: "/opt/skills" };
    expect(planOf("claude_code", skills).uploads).toEqual([
      { source: "/opt/skills", target: `${HOME}/.claude/skills` },
    ]);
    expect(planOf("codex", skills).uploads).toEqual([
      { source: "/opt/skills", target: `${HOME}/.codex/skills` },
    ]);
  });

  it("codex: reasoning effort and MCP servers in config.toml", () => {
    const effort = planOf("codex", { settings: { reasoning_effort: "low" } }).files[0]?.content;
    expect(effort).toBe(
      CODEX_TOML.replace(
        "check_for_update_on_startup = false\n",
        'check_for_update_on_startup = false\nmodel_reasoning_effort = "low"\n',
      ),
    );
    const mcp = planOf("codex", { mcp_servers: [MCP[0], MCP[2]] }).files[0]?.content;
    expect(mcp).toBe(
      `${CODEX_TOML}\n[mcp_servers.files]\ncommand = "mcp-files"\nargs = [ "--root", "/testbed" ]\n\n[mcp_servers.h]\nurl = "http://127.0.0.1:9/mcp"\n`,
    );
    expect(() => planOf("codex", { mcp_servers: MCP })).toThrow(
      "agent.mcp_servers.web: codex supports stdio and streamable-http",
    );
  });

  it("qwen_code, gemini_cli, opencode: MCP servers in their settings", () => {
    expect(planOf("qwen_code", { mcp_servers: MCP }).files[0]?.content).toBe(
      json({ ...QWEN_SETTINGS, mcpServers: JSON_MCP("httpUrl") }),
    );
    expect(planOf("gemini_cli", { mcp_servers: MCP }).files[0]?.content).toBe(
      json({ ...GEMINI_SETTINGS, mcpServers: JSON_MCP("httpUrl") }),
    );
    expect(planOf("opencode", { mcp_servers: MCP }).files[0]?.content).toBe(
      json({
        $schema: "https://opencode.ai/config.json",
        provider: { polar: OPENCODE_PROVIDER },
        model: `polar/${M}`,
        autoupdate: false,
        share: "disabled",
        mcp: {
          files: { type: "local", command: ["mcp-files", "--root", "/testbed"], enabled: true },
          web: { type: "remote", url: "http://127.0.0.1:9/sse", enabled: true },
          h: { type: "remote", url: "http://127.0.0.1:9/mcp", enabled: true },
        },
      }),
    );
  });

  it("mini_swe_agent, copilot_cli, continue: their own settings", () => {
    const mini = planOf("mini_swe_agent", { settings: { step_limit: 5, cost_limit: 1.5, sampling_seed: 3 } });
    expect(mini.steps[0]?.command).toBe(
      tee(
        "mini_swe_agent",
        `mini -y --exit-immediately -m 'openai/${M}' -t ${I} -o "$AGENT_LOG_DIR/mini_swe_agent.traj.json" -c agent.step_limit=5 -l 1.5 -c model.model_kwargs.seed=3`,
      ),
    );
    const copilot = (wire: string) => planOf("copilot_cli", { settings: { wire_api: wire } }).env;
    expect(copilot("anthropic")).toStrictEqual(
      copilotEnv({ COPILOT_PROVIDER_TYPE: "anthropic", COPILOT_PROVIDER_BASE_URL: "http://127.0.0.1:4100" }),
    );
    expect(copilot("completions")).toStrictEqual(
      copilotEnv({
        COPILOT_PROVIDER_TYPE: "openai",
        COPILOT_PROVIDER_BASE_URL: V1,
        COPILOT_PROVIDER_WIRE_API: "completions",
      }),
    );
    const messages = planOf("continue", { settings: { provider: "anthropic" } });
    expect(messages.files).toStrictEqual([
      { path: `${HOME}/.continue/polar.yaml`, content: continueYaml("anthropic", `${V1}/`) },
    ]);
  });

  it("bad values: the first bad key is named, common settings before the preset's own", () => {
    const bad = {
      max_turns: "many",
      step_limit: 0,
      cost_limit: -1,
      sampling_seed: -1,
      wire_api: "chat",
      provider: "gemini",
      reasoning_effort: 3,
      allowed_tools: "x",
    };
    const first: Partial<Record<PresetName, string>> = {
      claude_code: "agent.settings.max_turns: must be a positive integer",
      codex: "agent.settings.reasoning_effort: must be a string",
      mini_swe_agent: "agent.settings.step_limit: must be a positive integer",
      copilot_cli: "agent.settings.wire_api: must be responses, completions, anthropic",
      continue: "agent.settings.provider: must be one of openai, anthropic",
    };
    for (const name of names) {
      const run = () => planOf(name, { settings: bad });
      if (first[name]) expect(run).toThrow(first[name]);
      else expect(run).not.toThrow();
      expect(() => planOf(name, { settings: { ...bad, version: "1; rm" } })).toThrow(
        "agent.settings.version: '1; rm' is not a plain version",
      );
      expect(() => planOf(name, { settings: { install: "no", extra_args: "x" } })).toThrow(
        "agent.settings.install: must be true or false",
      );
      expect(() => planOf(name, { settings: { extra_args: "x" } })).toThrow(
        "agent.settings.extra_args: must be a list of strings",
      );
    }
  });

  it("MCP servers and skills: refused by name, or checked for what each transport needs", () => {
    const takesMcp = ["claude_code", "codex", "qwen_code", "opencode", "gemini_cli"];
    const takesSkills = ["claude_code", "codex"];
    const noCommand = [{ name: "n", transport: "stdio", args: [] }];
    const noUrl = [{ name: "u", transport: "sse" }];
    for (const name of names) {
      const mcp = () => planOf(name, { mcp_servers: noCommand, skills_path: "/s" });
      const url = () => planOf(name, { mcp_servers: noUrl });
      if (!takesMcp.includes(name)) {
        expect(mcp).toThrow(`agent.mcp_servers: harness '${name}' does not support MCP servers`);
        expect(url).toThrow(`agent.mcp_servers: harness '${name}' does not support MCP servers`);
      } else if (name === "codex") {
        expect(mcp).toThrow("agent.mcp_servers.n.command: required for stdio");
        expect(url).toThrow("agent.mcp_servers.u: codex supports stdio and streamable-http");
      } else {
        expect(url).toThrow("agent.mcp_servers.u.url: required for sse");
        // Skills are refused before MCP servers are looked at.
        if (takesSkills.includes(name))
          expect(mcp).toThrow("agent.mcp_servers.n.command: required for stdio");
        else expect(mcp).toThrow(`agent.skills_path: harness '${name}' does not support skills`);
      }
      const skills = () => planOf(name, { skills_path: "/s" });
      if (takesSkills.includes(name)) expect(skills).not.toThrow();
      else expect(skills).toThrow(`agent.skills_path: harness '${name}' does not support skills`);
    }
  });
});

describe("each preset's API families", () => {
  it("as docs/harnesses.md lists them, the default first", () => {
    const api = Object.fromEntries(Object.entries(PRESET_ENTRIES).map(([name, e]) => [name, e.api]));
    expect(api).toEqual({
      claude_code: ["anthropic"],
      codex: ["openai_responses"],
      qwen_code: ["openai_chat"],
      opencode: ["openai_chat"],
      gemini_cli: ["google"],
      pi: ["openai_chat"],
      mini_swe_agent: ["openai_chat"],
      copilot_cli: ["openai_responses", "openai_chat", "anthropic"],
      cline: ["openai_chat"],
      kilo_code: ["openai_chat"],
      continue: ["openai_chat", "anthropic"],
      grok_cli: ["openai_chat"],
      nanocoder: ["openai_chat"],
    });
  });
});
