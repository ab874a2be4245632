// `--options '<json>'` / `--options-file <path>` as `doctor` and `status` take them: the runtime
// options Paseo would send, as the raw JSON value (a single host's or a pool's).
import { readFileSync } from "node:fs";
import { RuntimeError, oneLine } from "../shared/errors.js";

export function readOptionsFlag(flags: Record<string, string>, operation: string): unknown {
  const inline = flags.options;
  const file = flags["options-file"];
  if ((inline === undefined) === (file === undefined)) {
    throw new RuntimeError("input", `${operation} needs exactly one of --options '<json>' or --options-file <path>`);
  }
  let text = inline;
  if (file !== undefined) {
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new RuntimeError(
        "input",
        `Cannot read --options-file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      );
    }
  }
  try {
    return JSON.parse(text!) as unknown;
  } catch (err) {
    throw new RuntimeError("input", `Runtime options are not valid JSON: ${oneLine((err as Error).message)}`);
  }
}
