// The delay proxy (bench/delay-proxy.mjs) as a process of its own, so the bench's own work never
// delays its timers. With `log`, it records when every chunk crossed it (DELAY_PROXY_LOG).
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const PROGRAM = fileURLToPath(new URL("./delay-proxy.mjs", import.meta.url));

/** SIGTERM, and resolves once the process is gone (SIGKILL after 3 s). */
function stopChild(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/** Resolves to { port, stop() } once the proxy listens; it exits by itself after `lifetimeMs`. */
export function startProxy(targetPort, delayMs, lifetimeMs, { log } = {}) {
  return new Promise((resolve, reject) => {
    const env = log ? { ...process.env, DELAY_PROXY_LOG: log } : process.env;
    const args = [PROGRAM, String(targetPort), String(delayMs), String(Math.ceil(lifetimeMs / 1000))];
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"], env });
    let text = "";
    child.stdout.on("data", (d) => {
      text += d;
      const m = /^(\d+)\n/.exec(text);
      if (m) resolve({ port: Number(m[1]), stop: () => stopChild(child) });
    });
    child.on("error", reject);
    child.on("exit", (code) => reject(new Error(`delay proxy exited (${code}) before it listened`)));
  });
}
