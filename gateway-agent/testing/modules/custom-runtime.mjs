// A custom runtime backend (loaded by `runtime.import_path` in the tests): plain bash in a folder
// of its own, marking every command it runs in `commands.log` so the test can see it was used.
import { spawn } from "node:child_process";
import { appendFileSync, cpSync, mkdirSync, rmSync } from "node:fs";
import path from "node:path";

export function create(spec, ctx) {
  const hostDir = path.join(ctx.workRoot, "sessions", ctx.name);
  rmSync(hostDir, { recursive: true, force: true });
  for (const d of ["workspace", "logs"]) mkdirSync(path.join(hostDir, d), { recursive: true });
  const workdir = path.join(hostDir, "workspace");
  return {
    backend: "custom-bash",
    hostDir,
    logsDir: path.join(hostDir, "logs"),
    sessionPath: hostDir,
    workdir,
    baseEnv: () => ({ PATH: process.env.PATH }),
    start: async () => appendFileSync(path.join(hostDir, "commands.log"), `start ${spec.kwargs.flavour}\n`),
    exec: (command, opts) =>
      new Promise((resolve) => {
        appendFileSync(path.join(hostDir, "commands.log"), `${command}\n`);
        const child = spawn("bash", ["-c", command], { cwd: opts.cwd ?? workdir, env: opts.env });
        let stdout = "";
        child.stdout.on("data", (c) => {
          stdout += c;
        });
        child.on("exit", (code, signal) =>
          resolve({ exitCode: code, signal, interrupted: false, timedOut: false, durationMs: 0, stdout }),
        );
      }),
    uploadFile: async (source, target) => cpSync(source, path.resolve(workdir, target)),
    uploadDir: async (source, target) => cpSync(source, path.resolve(workdir, target), { recursive: true }),
    teardown: async ({ keep }) => {
      if (!keep) rmSync(hostDir, { recursive: true, force: true });
    },
  };
}
