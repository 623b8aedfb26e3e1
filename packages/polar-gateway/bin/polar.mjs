#!/usr/bin/env node
// The `polar` command of the installed gateway package: the CLI compiled to JavaScript in
// ../dist (built by scripts/build-gateway-package.ts), so no TypeScript loader runs here.
import { runCli } from "../dist/main.js";

await runCli(process.argv);
