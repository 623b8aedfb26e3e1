/**
 * `npm run gen:api`: writes the control plane's OpenAPI document and the TypeScript client's types
 * generated from it (`clients/typescript/openapi.json`, `clients/typescript/src/schema.ts`).
 *
 * The document is built by the Worker's own code, which only runs in workerd (its modules import
 * `cloudflare:workers`), so the script starts the Worker with `wrangler dev` on a free port and
 * fetches `GET /openapi.json` from it, exactly what a deployed control plane serves.
 *
 * @module
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { DEV_TOKENS } from "../cli/dev-tokens";
import { REPO_ROOT, startControlPlaneDev } from "../cli/wrangler-dev";
import { DOCUMENT_PATH, documentText, SCHEMA_PATH, typesFromDocument } from "../clients/typescript/codegen";

const state = mkdtempSync(join(tmpdir(), "polar-gen-api-"));
const cp = await startControlPlaneDev({ persistTo: state, tokens: DEV_TOKENS });
try {
  const res = await fetch(`${cp.url}/openapi.json`);
  if (!res.ok) throw new Error(`GET /openapi.json answered ${res.status}`);
  const doc: unknown = await res.json();
  writeFileSync(DOCUMENT_PATH, documentText(doc));
  writeFileSync(SCHEMA_PATH, await typesFromDocument(doc));
  console.log(`wrote ${relative(REPO_ROOT, DOCUMENT_PATH)} and ${relative(REPO_ROOT, SCHEMA_PATH)}`);
} finally {
  await cp.stop();
  rmSync(state, { recursive: true, force: true });
}
