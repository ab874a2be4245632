// Writes an operation's single stdout value (docs/contract.md#exit-status): validated, canonical bytes, one line.
import type { Writable } from "node:stream";
import { OperationResponseSchema, encodeCanonical, type OperationResponse } from "../contract/index.js";
import { writeBytes } from "./write-bytes.js";

/** A lifecycle response (state / inspection / ok) or the merge-to-base response. */
export async function writeResponse(stdout: Writable, response: OperationResponse): Promise<void> {
  await writeBytes(stdout, encodeCanonical(OperationResponseSchema, response));
}
