// ssh2 instantiates a WebAssembly Poly1305 when it is loaded (a 16 MB linear memory, and V8's wasm
// compiler paged in), yet uses it only for chacha20-poly1305 when its native binding, built at
// install, is missing (upstream: https://github.com/mscdex/ssh2/issues/1494). The broker lives for
// hours and its memory is counted, so it calls this before ssh2 loads: with the binding present,
// require's cache gets a stand-in for that module which instantiates nothing. Without the binding
// nothing changes (ssh2 needs the real one then).
import Module, { createRequire } from "node:module";

const WASM_MODULE = "ssh2/lib/protocol/crypto/poly1305.js";
const BINDING = "ssh2/lib/protocol/crypto/build/Release/sshcrypto.node";

/** True when the stand-in is in place (ssh2 not loaded yet and its native ChaCha20-Poly1305 usable). */
export function skipUnusedPoly1305Wasm(): boolean {
  const require = createRequire(import.meta.url);
  let file: string;
  try {
    file = require.resolve(WASM_MODULE);
    if (require.cache[file]) return false;
    const binding = require(BINDING) as Record<string, unknown>;
    if (typeof binding.ChaChaPolyCipher !== "function" || typeof binding.ChaChaPolyDecipher !== "function") return false;
  } catch {
    return false;
  }
  // ssh2 awaits the module factory, takes _malloc(16) and cwrap("poly1305_auth", …) from it, and
  // calls the wrapped function only on its JavaScript ChaCha20 path, which the binding replaces.
  const unused = (): never => {
    throw new Error("ssh2's WebAssembly Poly1305 was skipped because the native binding is loaded");
  };
  const standIn = new Module(file);
  standIn.filename = file;
  standIn.loaded = true;
  standIn.exports = () => Promise.resolve({ _malloc: () => 0, cwrap: () => unused });
  require.cache[file] = standIn;
  return true;
}
