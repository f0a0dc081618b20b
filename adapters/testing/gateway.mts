// What the adapters' tests run against: a live `vigil serve` (VIGIL_BIN)
// on a free loopback port with a scratch database and tokens of their own.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** An agent token of agent "support" that may attribute events to a person. */
export const SUPPORT = "adapters-support-agent-01";
/** An operator: a person, "alice". */
export const OPERATOR = "adapters-operator-alice-2";

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((ok) => srv.listen(0, "127.0.0.1", ok));
  const port = (srv.address() as { port: number }).port;
  await new Promise((ok) => srv.close(ok));
  return port;
}

export class Gateway {
  url = "";
  private proc: ChildProcess | undefined;
  private readonly dir = mkdtempSync(join(tmpdir(), "vigil-adapters-"));
  private log = "";

  static async start(): Promise<Gateway> {
    const bin = process.env["VIGIL_BIN"];
    if (!bin) throw new Error("VIGIL_BIN must name a vigil binary (adapters/test.sh builds one)");
    const g = new Gateway();
    const config = join(g.dir, "config.json");
    writeFileSync(config, JSON.stringify({ tokens: [
      { token: SUPPORT, role: "agent", agent: "support", recordHuman: true },
      { token: OPERATOR, role: "operator", id: "alice" },
    ] }));
    const port = await freePort();
    g.url = `http://127.0.0.1:${port}`;
    g.proc = spawn(bin, ["serve", "--addr", `127.0.0.1:${port}`, "--db", join(g.dir, "vigil.db"),
      "--config", config, "--synchronous", "NORMAL"], { stdio: ["ignore", "pipe", "pipe"] });
    g.proc.stdout!.on("data", (b: Buffer) => (g.log += b));
    g.proc.stderr!.on("data", (b: Buffer) => (g.log += b));
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        if ((await fetch(g.url + "/healthz")).ok) return g;
      } catch {
        // not listening yet
      }
      if (g.proc.exitCode !== null || Date.now() > deadline) throw new Error(`vigil serve did not start:\n${g.log}`);
      await new Promise((ok) => setTimeout(ok, 50));
    }
  }

  async stop(): Promise<void> {
    const exited = new Promise((ok) => this.proc?.once("exit", ok));
    this.proc?.kill("SIGTERM");
    await exited;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
