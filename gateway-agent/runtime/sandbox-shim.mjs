// Runs inside a bubblewrap sandbox that has no network: listens on 127.0.0.1:PORT (the proxy's
// port, so the harness's OPENAI_BASE_URL works unchanged) and forwards each connection to the
// Unix socket the gateway bind-mounted into the sandbox, then runs the harness command and exits
// with its status. Plain JavaScript on purpose: it runs with the host's `node`, without tsx.
//
// `--user UID:GID` (a root gateway's session user): the shim starts as root so it can listen on
// any port, starts the command (which drops to the user itself, through setpriv, and reads the
// session's environment from fd 3, handed on here), then becomes that user too.
import { spawn } from "node:child_process";
import net from "node:net";

const args = process.argv.slice(2);
let user = null;
if (args[2] === "--user") {
  const [uid, gid] = (args[3] ?? "").split(":").map(Number);
  user = { uid, gid };
  args.splice(2, 2);
}
const [socketPath, port, ...command] = args;
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
  const stdio = user ? ["inherit", "inherit", "inherit", 3] : "inherit";
  const child = spawn(command[0], command.slice(1), { stdio });
  child.on("error", (err) => {
    console.error(`polar sandbox: cannot run ${command[0]}: ${err.message}`);
    process.exit(127);
  });
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 + 9 : 1)));
  if (user) {
    try {
      process.setgroups([]);
      process.setgid(user.gid);
      process.setuid(user.uid);
    } catch (err) {
      console.error(`polar sandbox: cannot become uid ${user.uid}: ${err.message}`);
      child.kill("SIGKILL");
      process.exit(125);
    }
  }
});
