// `describe`: tells Paseo the protocol version and modes we speak (docs/contract.md#schemas, docs/contract.md#target).
// It takes no flags and never touches stdin (Paseo closes it without data).
import type { DescribeResponse } from "../../contract/index.js";
import type { CliOperation } from "../operation.js";
import { writeShort } from "../write-bytes.js";

/** Ours (docs/contract.md#schemas); the extras are deliberately not advertised. */
export const DESCRIBE: DescribeResponse = { protocolVersion: 1, modes: ["pipes", "pty"], reconcile: true };

/**
 * DESCRIBE's canonical bytes, kept as a constant so `describe` (the most frequent probe) loads no
 * schema code; a unit test checks them against the canonical encoder.
 */
export const DESCRIBE_BYTES = '{"protocolVersion":1,"modes":["pipes","pty"],"reconcile":true}\n';

const operation: CliOperation = {
  requiredFlags: [],
  async run(_args, io) {
    await writeShort(io, DESCRIBE_BYTES);
  },
};
export default operation;
