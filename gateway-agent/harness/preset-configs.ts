/**
 * The parts of a few presets that are theirs alone: Codex's `config.toml`, the OpenCode-style
 * provider block (OpenCode and its fork Kilo Code), Continue's model config, Copilot CLI's
 * provider variables per wire API, and the settings that become Claude Code's and
 * mini-swe-agent's flags.
 *
 * @module
 */
import type { AgentSpec } from "../../protocol";
import { OFFLINE_KNOBS } from "./offline-knobs";
import { sq } from "./plan";
import { PROVIDER, type PresetCall } from "./preset-entry";
import { codexMcp } from "./preset-mcp";
import { isInt, isString, isStrings, oneOf, setting } from "./preset-settings";

/**
 * Claude Code's flags from `agent.settings` (`max_turns`, `allowed_tools`).
 *
 * @example
 * ```ts
 * claudeFlags(agent); // " --max-turns 30 --allowedTools 'Bash,Edit'"
 * ```
 */
export function claudeFlags(agent: AgentSpec): string {
  let flags = "";
  const maxTurns = setting(agent, "max_turns", isInt, "a positive integer");
  if (maxTurns) flags += ` --max-turns ${maxTurns}`;
  const allowed = setting(agent, "allowed_tools", isStrings, "a list of tool names");
  if (allowed) flags += ` --allowedTools ${sq(allowed.join(","))}`;
  return flags;
}

/**
 * Codex's `config.toml`: the proxy as a Responses provider, its offline knobs, the reasoning
 * effort (`agent.settings.reasoning_effort`) and MCP servers.
 *
 * @example
 * ```ts
 * toToml(codexConfig(c));
 * ```
 */
export function codexConfig(c: PresetCall<unknown>): Record<string, unknown> {
  const config: Record<string, unknown> = {
    model: c.ctx.model,
    model_provider: PROVIDER,
    ...OFFLINE_KNOBS.codex.config,
    model_providers: {
      [PROVIDER]: { name: "Polar proxy", base_url: c.v1, env_key: "OPENAI_API_KEY", wire_api: "responses" },
    },
  };
  const effort = setting(c.agent, "reasoning_effort", isString, "a string");
  if (effort) config.model_reasoning_effort = effort;
  if (c.agent.mcp_servers.length) config.mcp_servers = codexMcp(c.agent);
  return config;
}

/**
 * The provider block and model reference of OpenCode's config, which its fork Kilo Code reads too.
 *
 * @example
 * ```ts
 * const config = { ...opencodeProvider(c), autoupdate: false };
 * ```
 */
export function opencodeProvider(c: PresetCall<unknown>) {
  return {
    provider: {
      [PROVIDER]: {
        npm: "@ai-sdk/openai-compatible",
        name: "Polar proxy",
        options: { baseURL: c.v1, apiKey: c.ctx.sessionKey },
        models: { [c.ctx.model]: {} },
      },
    },
    model: `${PROVIDER}/${c.ctx.model}`,
  };
}

/** mini-swe-agent's own settings. */
export interface MiniOptions {
  steps?: number;
  cost?: number;
  seed?: number;
}

/**
 * mini-swe-agent's `step_limit`, `cost_limit` and `sampling_seed`.
 *
 * @example
 * ```ts
 * miniFlags(miniOptions(agent)); // " -c agent.step_limit=50 -l 0"
 * ```
 */
export function miniOptions(agent: AgentSpec): MiniOptions {
  return {
    steps: setting(agent, "step_limit", isInt, "a positive integer"),
    cost: setting(agent, "cost_limit", (v): v is number => typeof v === "number" && v >= 0, "a number >= 0"),
    // Upstream's per-sample eval seed (the control plane sets it from metadata.eval_sampling_seed_base),
    // passed to every model call through LiteLLM's model_kwargs, as upstream's preset does.
    seed: setting(
      agent,
      "sampling_seed",
      (v): v is number => Number.isSafeInteger(v) && (v as number) >= 0,
      "a non-negative integer",
    ),
  };
}

/** mini-swe-agent's flags for {@link miniOptions}. */
export function miniFlags(o: MiniOptions): string {
  let flags = "";
  if (o.steps) flags += ` -c agent.step_limit=${o.steps}`;
  if (o.cost !== undefined) flags += ` -l ${o.cost}`;
  if (o.seed !== undefined) flags += ` -c model.model_kwargs.seed=${o.seed}`;
  return flags;
}

/** Copilot CLI's three wire APIs (`agent.settings.wire_api`). */
export const COPILOT_WIRE_APIS = ["responses", "completions", "anthropic"] as const;
export type CopilotWire = (typeof COPILOT_WIRE_APIS)[number];

/**
 * Copilot CLI's wire API. Responses by default: on OpenAI Chat and Anthropic Messages Copilot CLI
 * sends temperature 0, so every session of a group samples alike; on Responses it leaves sampling
 * to the server.
 *
 * @example
 * ```ts
 * copilotWire(agent); // "responses"
 * ```
 */
export function copilotWire(agent: AgentSpec): CopilotWire {
  return setting(agent, "wire_api", oneOf(COPILOT_WIRE_APIS), COPILOT_WIRE_APIS.join(", ")) ?? "responses";
}

/**
 * Copilot CLI's environment: offline, its HOME, and the proxy as its provider on `wire`.
 *
 * @example
 * ```ts
 * copilotEnv(c).COPILOT_PROVIDER_TYPE; // "openai"
 * ```
 */
export function copilotEnv(c: PresetCall<CopilotWire>): Record<string, string> {
  const anthropic = c.options === "anthropic";
  return {
    ...OFFLINE_KNOBS.copilot_cli.env,
    COPILOT_HOME: `${c.home}/.copilot`,
    COPILOT_PROVIDER_TYPE: anthropic ? "anthropic" : "openai",
    COPILOT_PROVIDER_BASE_URL: anthropic ? c.ctx.proxyUrl : c.v1,
    ...(anthropic ? {} : { COPILOT_PROVIDER_WIRE_API: c.options }),
    COPILOT_PROVIDER_API_KEY: c.ctx.sessionKey,
    COPILOT_MODEL: c.ctx.model,
    COPILOT_ALLOW_ALL: "true",
  };
}

/** The API families `cn` can be given the proxy as (`agent.settings.provider`). */
const CONTINUE_PROVIDERS = ["openai", "anthropic"] as const;
export type ContinueProvider = (typeof CONTINUE_PROVIDERS)[number];

/**
 * Continue's provider (`agent.settings.provider`; OpenAI Chat by default).
 *
 * @example
 * ```ts
 * continueProvider(agent); // "openai"
 * ```
 */
export function continueProvider(agent: AgentSpec): ContinueProvider {
  return (
    setting(agent, "provider", oneOf(CONTINUE_PROVIDERS), `one of ${CONTINUE_PROVIDERS.join(", ")}`) ??
    "openai"
  );
}

/**
 * Continue's v1 config: the one model, on the proxy.
 *
 * @example
 * ```ts
 * toYaml(continueConfig(c));
 * ```
 */
export function continueConfig(c: PresetCall<ContinueProvider>) {
  const provider = c.options;
  return {
    name: "polar",
    version: "1.0.0",
    schema: "v1",
    models: [
      {
        name: "polar",
        provider,
        model: c.ctx.model,
        // Its Anthropic provider appends `messages` to the base, so that one ends with a slash.
        apiBase: provider === "anthropic" ? `${c.v1}/` : c.v1,
        apiKey: c.ctx.sessionKey,
        roles: ["chat", "edit", "apply"],
      },
    ],
  };
}
