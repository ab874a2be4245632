// The shape both ssh_config paths produce: what `ssh -G` prints, one list entry per printed line,
// keyed by lower-case keyword. The fallback evaluator (evaluate.ts) fills the same shape for the
// keywords we honour, so one interpreter (host-config.ts) serves both and golden tests can
// compare them line for line.

export type Dump = Map<string, string[]>;

/** Where a value came from, for doctor: `file:line`. */
export interface Source {
  file: string;
  line: number;
  text: string;
}

export interface Evaluated {
  dump: Dump;
  /** Config lines that set each honoured keyword (first value, or every IdentityFile line). */
  sources: Map<string, Source[]>;
  /** Which evaluation produced it. */
  via: "ssh -G" | "parser";
}

/** Parses `ssh -G` output. */
export function parseDump(text: string): Dump {
  const dump: Dump = new Map();
  for (const line of text.split("\n")) {
    const at = line.indexOf(" ");
    if (at <= 0) continue;
    const key = line.slice(0, at).toLowerCase();
    const list = dump.get(key) ?? [];
    list.push(line.slice(at + 1));
    dump.set(key, list);
  }
  return dump;
}

export function first(dump: Dump, key: string): string | undefined {
  return dump.get(key)?.[0];
}
