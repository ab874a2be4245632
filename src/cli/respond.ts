// Writes an operation's single stdout value (docs/contract.md#exit-status): validated, canonical bytes, one line.
import type { Writable } from "node:stream";
import { encodeCanonical } from "../contract/codec.js";
import type { OperationResponse } from "../contract/schemas.js";
import { writeBytes } from "./write-bytes.js";

/** A lifecycle response (state / inspection / ok) or the merge-to-base response. */
export async function writeResponse(stdout: Writable, response: OperationResponse): Promise<void> {
  // Loaded when a response is written: the response schemas (with every other contract schema)
  // are constructed only by the operations that answer on stdout.
  const { OperationResponseSchema } = await import("../contract/schemas.js");
  await writeBytes(stdout, encodeCanonical(OperationResponseSchema, response));
}
