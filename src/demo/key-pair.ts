// Fresh SSH key pairs for the demo server and the test rigs. ssh2 0.x/1.x sometimes writes an
// ed25519 key whose public half lost a leading zero byte (31 bytes instead of 32): about one key
// in 300, and neither ssh2 nor OpenSSH will read it back. We keep ssh2's generator (it writes the
// OpenSSH formats both sides need) and only hand out a pair that reads back whole.
import ssh2 from "ssh2";
import { RuntimeError } from "../shared/errors.js";

// ssh2 is CommonJS: named imports do not survive the ESM bundle, the default export does.
const { utils } = ssh2;

export interface KeyPair {
  private: string;
  public: string;
}

export type KeyPairOptions =
  | { type: "ed25519"; comment?: string; passphrase?: string; cipher?: string }
  | { type: "ecdsa"; bits: 256 | 384 | 521; comment?: string; passphrase?: string; cipher?: string };

/** A broken key comes about one in 300 times; 20 tries leave a chance of about 1e-49. */
const ATTEMPTS = 20;

function readsBack(pair: KeyPair, passphrase: string | undefined): boolean {
  const pub = utils.parseKey(pair.public);
  const priv = utils.parseKey(pair.private, passphrase);
  if (pub instanceof Error || priv instanceof Error) return false;
  const a = Array.isArray(pub) ? pub[0] : pub;
  const b = Array.isArray(priv) ? priv[0] : priv;
  return !!a && !!b && a.getPublicSSH().equals(b.getPublicSSH());
}

export function generateKeyPair(opts: KeyPairOptions): KeyPair {
  const { type, ...rest } = opts;
  for (let i = 0; i < ATTEMPTS; i++) {
    const pair = type === "ecdsa" ? utils.generateKeyPairSync(type, { ...rest, bits: opts.bits }) : utils.generateKeyPairSync(type, rest);
    if (readsBack(pair, opts.passphrase)) return pair;
  }
  throw new RuntimeError("remote-dependency", `could not generate a readable ${type} key in ${ATTEMPTS} attempts`);
}
