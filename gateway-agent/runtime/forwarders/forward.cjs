// Runs as PID 1 of a container that has no network (`--network none`): listens on
// 127.0.0.1:PORT (the proxy's port, so the harness's OPENAI_BASE_URL works unchanged) and relays
// each connection to the gateway's proxy socket bind-mounted into the container.
// CommonJS and no syntax newer than Node 8, on purpose: it runs with whatever `node` the image has.
"use strict";
const net = require("node:net");

const socketPath = process.argv[2];
const port = Number(process.argv[3]);
// PID 1 ignores SIGTERM unless it installs a handler: exit at once when the container stops.
process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
const server = net.createServer((client) => {
  const upstream = net.connect(socketPath);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("error", () => upstream.destroy());
  upstream.on("error", (err) => {
    console.error(`polar-forward: proxy socket ${socketPath}: ${err.message}`);
    client.destroy();
  });
});
server.on("error", (err) => {
  console.error(`polar-forward: cannot listen on 127.0.0.1:${port}: ${err.message}`);
  process.exit(125);
});
server.listen(port, "127.0.0.1", () => console.log("polar-forward: ready node"));
