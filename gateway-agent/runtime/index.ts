/**
 * Runtime factory: `local`, `docker`, `apptainer`, or a custom backend loaded from
 * `runtime.import_path` (`./path/to/module.mjs:exportName`, the export being a
 * {@link RuntimeFactory}).
 *
 * @module
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { RUNTIME_BACKENDS, type RuntimeSpec } from "../../protocol";
import { messageOf, SessionFailure } from "../errors";
import { ApptainerRuntime } from "./apptainer";
import { DockerRuntime } from "./docker";
import { LocalRuntime } from "./local";
import type { Runtime, RuntimeContext, RuntimeFactory } from "./types";

export * from "./apptainer";
export * from "./bwrap";
export * from "./container-bridge";
export * from "./docker";
export * from "./limits";
export * from "./local";
export * from "./prepare";
export * from "./process";
export * from "./session-user";
export * from "./storage";
export * from "./types";

/** Backends built in (the shared list of `protocol/names.ts`). */
export const BUILTIN_RUNTIMES = RUNTIME_BACKENDS;

/**
 * Loads `module:export` (relative module paths resolve from the gateway's working folder); the
 * export must be a function. Used for custom runtimes, harnesses and evaluators. A module that
 * does not load or lacks the export is a `configuration` failure naming `field`: the task names
 * code this gateway does not have, and another attempt would fail the same way.
 *
 * @example
 * ```ts
 * const factory = await importByPath("./my-runtime.mjs:create", "runtime.import_path");
 * ```
 */
export async function importByPath(spec: string, field: string): Promise<(...args: never[]) => unknown> {
  const at = spec.lastIndexOf(":");
  // A Windows drive letter or a bare module name without an export: use the default export.
  const hasExport = at > 1 && !spec.slice(at).includes("/");
  const modulePath = hasExport ? spec.slice(0, at) : spec;
  const exportName = hasExport ? spec.slice(at + 1) : "default";
  const specifier =
    modulePath.startsWith(".") || path.isAbsolute(modulePath)
      ? pathToFileURL(path.resolve(modulePath)).href
      : modulePath;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(specifier)) as Record<string, unknown>;
  } catch (err) {
    throw new SessionFailure("configuration", `${field}: cannot import '${modulePath}': ${messageOf(err)}`);
  }
  const value = mod[exportName];
  if (typeof value !== "function") {
    throw new SessionFailure(
      "configuration",
      `${field}: '${modulePath}' has no function export '${exportName}' (found ${typeof value})`,
    );
  }
  return value as (...args: never[]) => unknown;
}

/**
 * Creates (not yet starts) the runtime a spec asks for.
 *
 * @example
 * ```ts
 * const rt = await createRuntime(spec, ctx);
 * await rt.start(signal);
 * ```
 */
export async function createRuntime(spec: RuntimeSpec, ctx: RuntimeContext): Promise<Runtime> {
  if (spec.import_path) {
    const factory = (await importByPath(
      spec.import_path,
      "runtime.import_path",
    )) as unknown as RuntimeFactory;
    return await factory(spec, ctx);
  }
  switch (spec.backend) {
    case "local":
      return LocalRuntime.create(spec, ctx);
    case "docker":
      return DockerRuntime.create(spec, ctx);
    case "apptainer":
      return ApptainerRuntime.create(spec, ctx);
  }
}
