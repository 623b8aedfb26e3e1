/**
 * `agent.mcp_servers` in the shapes the CLIs' config files take. A server lacking what its
 * transport needs (a command for stdio, a URL otherwise) is a `configuration` failure naming it.
 *
 * @module
 */
import type { AgentSpec } from "../../protocol";
import { SessionFailure } from "../errors";

type McpServer = AgentSpec["mcp_servers"][number];

function commandOf(s: McpServer): string {
  if (!s.command)
    throw new SessionFailure("configuration", `agent.mcp_servers.${s.name}.command: required for stdio`);
  return s.command;
}

function urlOf(s: McpServer): string {
  if (!s.url)
    throw new SessionFailure("configuration", `agent.mcp_servers.${s.name}.url: required for ${s.transport}`);
  return s.url;
}

function byName(agent: AgentSpec, shape: (s: McpServer) => unknown): Record<string, unknown> {
  const servers: Record<string, unknown> = {};
  for (const s of agent.mcp_servers) servers[s.name] = shape(s);
  return servers;
}

/**
 * MCP servers in the `mcpServers` JSON shape shared by Claude Code (`url`), Qwen Code and Gemini
 * CLI (`httpUrl`).
 *
 * @example
 * ```ts
 * const settings = { mcpServers: mcpServersJson(agent, "httpUrl") };
 * ```
 */
export function mcpServersJson(agent: AgentSpec, httpKey: "url" | "httpUrl"): Record<string, unknown> {
  return byName(agent, (s) => {
    if (s.transport === "stdio") return { command: commandOf(s), args: s.args };
    const url = urlOf(s);
    return s.transport === "sse" ? { type: "sse", url } : { type: "http", [httpKey]: url };
  });
}

/**
 * MCP servers as OpenCode's `mcp` block: local (stdio) or remote.
 *
 * @example
 * ```ts
 * const config = { mcp: opencodeMcp(agent) };
 * ```
 */
export function opencodeMcp(agent: AgentSpec): Record<string, unknown> {
  return byName(agent, (s) =>
    s.transport === "stdio"
      ? { type: "local", command: [commandOf(s), ...s.args], enabled: true }
      : { type: "remote", url: urlOf(s), enabled: true },
  );
}

/**
 * MCP servers as Codex's `[mcp_servers]` tables: stdio, or streamable HTTP (the only two it takes).
 *
 * @example
 * ```ts
 * config.mcp_servers = codexMcp(agent);
 * ```
 */
export function codexMcp(agent: AgentSpec): Record<string, unknown> {
  return byName(agent, (s) => {
    if (s.transport === "stdio") return { command: commandOf(s), args: s.args };
    if (s.transport === "streamable-http" && s.url) return { url: s.url };
    throw new SessionFailure(
      "configuration",
      `agent.mcp_servers.${s.name}: codex supports stdio and streamable-http`,
    );
  });
}
