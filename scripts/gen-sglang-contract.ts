/**
 * `npm run gen:sglang-contract`: writes the reference engine's JSON copy of the shared `/generate`
 * contract (`protocol/sglang-contract.ts`) into its Python package, where `sampling.py` and
 * `engine.py` load it. `protocol/sglang-contract.test.ts` fails while the copy is stale.
 *
 * @module
 */
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { SGLANG_CONTRACT_COPY_PATH, sglangContractJson } from "../protocol/sglang-contract";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
writeFileSync(join(root, SGLANG_CONTRACT_COPY_PATH), sglangContractJson());
console.log(`wrote ${SGLANG_CONTRACT_COPY_PATH}`);
