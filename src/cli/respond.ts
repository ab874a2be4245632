// Writes an operation's single stdout value (docs/contract.md#exit-status): validated, canonical bytes, one line.
import type { Writable } from "node:stream";
import {
  DescribeResponseSchema,
  OperationResponseSchema,
  encodeCanonical,
  type DescribeResponse,
  type OperationResponse,
} from "../contract/index.js";

/** Ours (docs/contract.md#schemas); the extras are deliberately not advertised. */
export const DESCRIBE: DescribeResponse = { protocolVersion: 1, modes: ["pipes", "pty"], reconcile: true };

/** Resolves once the bytes are handed to the stream, so the dispatcher may exit right after. */
export function writeBytes(stdout: Writable, bytes: string | Uint8Array): Promise<void> {
  return new Promise((resolve, reject) => {
    stdout.write(bytes, (err) => (err ? reject(err) : resolve()));
  });
}

/** A lifecycle response (state / inspection / ok) or the merge-to-base response. */
export async function writeResponse(stdout: Writable, response: OperationResponse): Promise<void> {
  await writeBytes(stdout, encodeCanonical(OperationResponseSchema, response));
}

export async function writeDescribe(stdout: Writable): Promise<void> {
  await writeBytes(stdout, encodeCanonical(DescribeResponseSchema, DESCRIBE));
}
