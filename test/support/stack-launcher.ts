/**
 * A launcher for the lifetime tests: starts the local stack (control plane via wrangler dev, the
 * sim engine, one gateway, each under the reaper), prints one JSON line with its ports, and idles
 * until it is killed. Test-only: `node --import tsx test/support/stack-launcher.ts`.
 *
 * @module
 */
import { startLocalStack } from "../../cli/local-stack";

const stack = await startLocalStack({ gateways: 1 });
console.log(
  JSON.stringify({
    controlPlanePort: stack.controlPlane.port,
    enginePort: Number(new URL(stack.engineUrl).port),
  }),
);
setInterval(() => {}, 1000);
