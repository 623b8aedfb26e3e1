// Runs inside a bubblewrap sandbox that has no network: listens on 127.0.0.1:PORT (the proxy's
// port, so the harness's OPENAI_BASE_URL works unchanged) and forwards each connection to the
// Unix socket the gateway bind-mounted into the sandbox, then runs the harness command and exits
// with its status. Plain JavaScript on purpose: it runs with the host's `node`, without tsx.
import { spawn } from "node:child_process";
import net from "node:net";

const [socketPath, port, ...command] = process.argv.slice(2);
const server = net.createServer((client) => {
  const upstream = net.connect(socketPath);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("error", () => upstream.destroy());
  upstream.on("error", () => client.destroy());
});
server.on("error", (err) => {
  console.error(`polar sandbox: cannot listen on 127.0.0.1:${port}: ${err.message}`);
  process.exit(125);
});
server.listen(Number(port), "127.0.0.1", () => {
  const child = spawn(command[0], command.slice(1), { stdio: "inherit" });
  child.on("error", (err) => {
    console.error(`polar sandbox: cannot run ${command[0]}: ${err.message}`);
    process.exit(127);
  });
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 + 9 : 1)));
});
