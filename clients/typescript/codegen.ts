/**
 * How the client package's types are made from the control plane's OpenAPI document: one function
 * for `npm run gen:api` (which writes them) and for the contract test (which checks that the
 * checked-in files are what the document gives today), so both always agree on the output.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

/** This package's folder. */
export const PACKAGE_DIR = dirname(fileURLToPath(import.meta.url));
/** The document as served at `/openapi.json`, checked in: what others generate clients from. */
export const DOCUMENT_PATH = join(PACKAGE_DIR, "openapi.json");
/** The generated TypeScript types (`paths`, `components`, `operations`). */
export const SCHEMA_PATH = join(PACKAGE_DIR, "src", "schema.ts");

/**
 * The document's text as checked in: 2-space JSON with a final newline, so a diff of two versions
 * shows the operation that changed.
 *
 * @example
 * ```ts
 * writeFileSync(DOCUMENT_PATH, documentText(await (await fetch(`${url}/openapi.json`)).json()));
 * ```
 */
export function documentText(doc: unknown): string {
  return `${JSON.stringify(doc, null, 2)}\n`;
}

/**
 * The TypeScript types openapi-typescript generates from `doc`.
 *
 * @example
 * ```ts
 * writeFileSync(SCHEMA_PATH, await typesFromDocument(JSON.parse(readFileSync(DOCUMENT_PATH, "utf8"))));
 * ```
 */
export async function typesFromDocument(doc: unknown): Promise<string> {
  // The document is passed as an object: openapi-typescript resolves nothing over the network.
  const ast = await openapiTS(doc as Parameters<typeof openapiTS>[0], { silent: true });
  return astToString(ast);
}
