#!/usr/bin/env node
// The `polar` command. The CLI is written in TypeScript and run through tsx's loader, so a
// clone works without a build step.
import { register } from "tsx/esm/api";

register();
const { runCli } = await import("../cli/main.ts");
await runCli(process.argv);
