#!/usr/bin/env node
// The `polar` command. The CLI is written in TypeScript; a clone works without a build step. It
// runs from a bundle of the sources, made (and remade after an edit) on first use, which starts
// without tsx's loader (bin/cli-bundle.mjs); where that is turned off (POLAR_CLI_BUNDLE=0) or
// cannot be made, the sources run through tsx.
import { fileURLToPath } from "node:url";
import { bundledCli } from "./cli-bundle.mjs";

const entry = await bundledCli(fileURLToPath(new URL("..", import.meta.url)));
let runCli;
if (entry) ({ runCli } = await import(entry));
else {
  const { register } = await import("tsx/esm/api");
  register();
  ({ runCli } = await import("../cli/main.ts"));
}
await runCli(process.argv);
