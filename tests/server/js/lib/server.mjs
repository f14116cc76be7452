// Starts `g4 serve` on a free port for a test and stops it afterwards.
// G4_BIN (the built g4) and G4_MODEL (a model directory) come from run.sh.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const G4_BIN = process.env.G4_BIN;
export const G4_MODEL = process.env.G4_MODEL;

export function tempDir(prefix = "g4-server-test-") {
  return mkdtempSync(join(tmpdir(), prefix));
}

// Resolves once the server prints its address. `args` are extra flags.
export function startServer(args = [], { env = {} } = {}) {
  if (!G4_BIN || !G4_MODEL) throw new Error("set G4_BIN and G4_MODEL (tests/server/js/run.sh does)");
  const proc = spawn(G4_BIN, ["serve", G4_MODEL, "--port", "0", ...args], {
    env: { ...process.env, OMP_WAIT_POLICY: "passive", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "", stderr = "";
  proc.stderr.on("data", (d) => { stderr += d; });
  const exited = new Promise((resolve) => proc.on("exit", (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("g4 serve did not start: " + stderr)), 60000);
    proc.stdout.on("data", (d) => {
      stdout += d;
      const m = stdout.match(/listening on (http:\/\/[\d.]+:(\d+))/);
      if (m) {
        clearTimeout(timer);
        resolve({
          url: m[1],
          port: Number(m[2]),
          proc,
          exited,
          stderr: () => stderr,
          async stop(signal = "SIGTERM") {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
            return exited;
          },
        });
      }
    });
    exited.then(({ code, signal }) => reject(new Error(`g4 serve exited (${code ?? signal}): ${stderr}`)));
  });
}

// The value of a Prometheus metric line ("name" or "name{labels}").
export async function metric(url, name, headers = {}) {
  const text = await (await fetch(url + "/metrics", { headers })).text();
  for (const line of text.split("\n")) {
    if (line.startsWith(name + " ")) return Number(line.slice(name.length + 1));
  }
  return undefined;
}

export async function eventually(pred, seconds = 30) {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    if (await pred()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}
