#!/usr/bin/env node
// Reaper: sits between a launcher (`polar dev`, the demo, a test) and one child it starts, so that
// whatever ends the launcher — SIGKILL, a crash, a closed terminal — also ends the child and every
// process of the child's group (wrangler's workerd, a gateway's helpers). SIGKILL cannot be caught,
// so the launcher cannot clean up itself; instead it holds one end of a pipe (fd 3 here) and the
// kernel closes it when the launcher dies, however it dies. EOF on fd 3 = the launcher is gone.
//
//   node cli/reaper.mjs GRACE_MS FILE [ARGS…]     (started by cli/child-process.ts, never by hand)
//
// The child runs in a process group of its own (its pid = the group id), so a signal to the group
// reaches its grandchildren too; the reaper stays outside it, so it outlives the group kill.
// - fd 3 EOF, SIGTERM, SIGINT, SIGHUP: SIGTERM to the child's group, SIGKILL after GRACE_MS.
// - SIGUSR2: SIGKILL to the child's group now (a launcher simulating a crash).
// - Once its handlers are in place it writes one byte on fd 3; the launcher signals it only then.
// - The child exits: SIGKILL to what is left of its group, then the reaper exits the same way
//   (same code, or the same signal), so the launcher sees the child's own exit status.
// Plain JavaScript (no tsx) so it starts in a few milliseconds.
import { spawn } from "node:child_process";
import net from "node:net";

const [graceArg, file, ...args] = process.argv.slice(2);
const graceMs = Number(graceArg);
if (!file || !Number.isFinite(graceMs) || graceMs < 0) {
  console.error("reaper: usage: reaper.mjs GRACE_MS FILE [ARGS…]");
  process.exit(2);
}

// Handlers first, child second: a signal that arrives while the child is spawned waits for the
// event loop, by which time `child` is set.
let child = null;
let escalation = null;

/** Signals the child's whole group; false once nothing of it is left. */
function signalGroup(signal) {
  if (child?.pid === undefined) return false;
  try {
    process.kill(-child.pid, signal);
    return true;
  } catch {
    return false; // ESRCH: the group is empty
  }
}

function stopGracefully() {
  if (escalation) return;
  signalGroup("SIGTERM");
  escalation = setTimeout(() => signalGroup("SIGKILL"), graceMs);
}

for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) process.on(signal, stopGracefully);
process.on("SIGUSR2", () => signalGroup("SIGKILL"));

// The lifeline. Absent (fd 3 not open) only when started by hand; then signals still work.
let lifeline = null;
try {
  lifeline = new net.Socket({ fd: 3, readable: true, writable: true });
  lifeline.on("end", stopGracefully);
  lifeline.on("close", stopGracefully);
  lifeline.on("error", stopGracefully);
  lifeline.resume();
} catch {
  lifeline = null;
}

child = spawn(file, args, { stdio: "inherit", detached: true });
// Tell the launcher the handlers are in place: its stop()/kill() wait for this byte (a signal
// sent earlier, while Node was still starting, would have killed the reaper alone).
lifeline?.write("r");

child.on("error", (err) => {
  console.error(`reaper: cannot start ${file}: ${err.message}`);
  process.exit(127);
});

child.on("exit", (code, signal) => {
  // Grandchildren the child left behind (it may have died without stopping them).
  signalGroup("SIGKILL");
  if (escalation) clearTimeout(escalation);
  if (signal) {
    // Exit the way the child did: drop our handlers so the signal's default action applies.
    for (const s of ["SIGTERM", "SIGINT", "SIGHUP", "SIGUSR2"]) process.removeAllListeners(s);
    process.kill(process.pid, signal);
    // A signal whose default is not to terminate (none of the usual ones): still end.
    setTimeout(() => process.exit(128), 100).unref();
    return;
  }
  process.exit(code ?? 1);
});
