/**
 * Reading a preset's `agent.settings`: each key is checked when it is set, and a bad value is a
 * `configuration` failure naming the key and what it must be.
 *
 * @module
 */
import type { AgentSpec } from "../../protocol";
import { SessionFailure } from "../errors";

/**
 * `agent.settings[key]` when set and passing `check`; undefined when unset.
 *
 * @example
 * ```ts
 * const maxTurns = setting(agent, "max_turns", isInt, "a positive integer");
 * ```
 */
export function setting<T>(
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

/** A non-empty string. */
export const isString = (v: unknown): v is string => typeof v === "string" && v.length > 0;
/** True or false. */
export const isBool = (v: unknown): v is boolean => typeof v === "boolean";
/** A positive integer. */
export const isInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;
/** A list of strings. */
export const isStrings = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((x) => typeof x === "string");

/**
 * A check that the value is one of `values`.
 *
 * @example
 * ```ts
 * setting(agent, "provider", oneOf(["openai", "anthropic"] as const), "one of openai, anthropic");
 * ```
 */
export function oneOf<T extends string>(values: readonly T[]): (v: unknown) => v is T {
  return (v): v is T => (values as readonly unknown[]).includes(v);
}
