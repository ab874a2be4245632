// The first module of the broker bundle: what must happen before ssh2 is loaded, then the broker
// itself. run-broker.ts is imported, not statically, so that its imports (ssh2 among them) are evaluated
// only after this.
import { skipUnusedPoly1305Wasm } from "../../transport/ssh2-poly1305.js";

const skipped = skipUnusedPoly1305Wasm();
process.stderr.write(
  `${new Date().toISOString()} broker ${process.pid}: ssh2's WebAssembly Poly1305 ${skipped ? "skipped (its native binding is loaded)" : "loaded (no native binding)"}\n`,
);
void import("./run-broker.js");
