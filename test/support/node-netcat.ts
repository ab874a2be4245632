// A ProxyCommand that needs no netcat: this node, joining its stdin and stdout to host:port, so a
// proxy test runs on any machine that runs the suite (nc is not on a fresh one).
import { writeFileSync } from "node:fs";
import { join } from "node:path";

const NETCAT = `const s = require("net").connect(Number(process.argv[3]), process.argv[2]);
process.stdin.pipe(s).pipe(process.stdout);
s.on("error", (e) => { process.stderr.write("node-netcat: " + e.message + "\\n"); process.exit(1); });
s.on("close", () => process.exit(0));
`;

/** Writes the script into `dir`; returns the command line's head (append "%h %p" or a host and port). */
export function nodeNetcat(dir: string): string {
  const script = join(dir, "node-netcat.cjs");
  writeFileSync(script, NETCAT);
  return `${process.execPath} ${script}`;
}
