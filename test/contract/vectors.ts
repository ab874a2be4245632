// The contract's test vectors shared by every suite: the verbatim examples/v1.json (test/fixtures/v1.json) and raw byte
// conversations (exec suites replay these against the real wrapper).
import { readFileSync } from "node:fs";

export const V1_PATH = new URL("../fixtures/v1.json", import.meta.url);
export const V1_TEXT = readFileSync(V1_PATH, "utf8");

type Examples = Record<string, unknown> & { bytes: Record<string, string> };
/** A fresh copy each call, so a test may mutate it. */
export function v1Examples(): Examples {
  return JSON.parse(V1_TEXT) as Examples;
}

const hex = (text: string) => Buffer.from(text.replace(/ /g, ""), "hex");

/** Raw byte vectors. */
export const RAW = {
  pipes: { stdin: hex("72 61 77 00 73 74 64 69 6e 0a"), stdout: hex("00 6f 75 74 ff"), stderr: hex("65 72 72 00") },
  pty: { stdin: hex("74 65 72 6d 00 ff"), stdout: hex("74 65 72 6d 00 ff"), stderr: hex("70 74 79 00") },
};

/** Further frames. */
export const FRAMES = {
  ptyExitAfterSigterm: '{"type":"exit","protocolVersion":1,"code":null,"signal":"SIGTERM"}\n',
  wrongVersion: ['{"type":"exit","protocolVersion":2,"code":0,"signal":null}\n', '{"type":"started","protocolVersion":2}\n'],
  malformed: ["{malformed}\n", "{nope}\n"],
  unknownDiscriminator: '{"protocolVersion":1,"type":"invalid"}\n',
};
