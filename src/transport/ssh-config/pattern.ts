// OpenSSH's pattern matching (match.c): Host lines, Match criteria and, for the ssh -G answer
// cache, the file names a glob Include picks up.

/** OpenSSH match_pattern: `*` any run, `?` exactly one character. */
export function matchPattern(text: string, pattern: string): boolean {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, "\\$&")
    .replace(/\*/g, ".*")
    .replace(/\?/g, ".");
  return new RegExp(`^${body}$`, "s").test(text);
}

/** OpenSSH match_pattern_list: 1 match, -1 negated match, 0 none. `lowercase`: patterns compared lowercased (host names). */
export function matchPatternList(text: string, list: string, patterns: "lowercase" | "as-written"): 1 | 0 | -1 {
  const lower = patterns === "lowercase";
  let positive = false;
  for (const raw of list.split(",")) {
    const negated = raw.startsWith("!");
    const pattern = (negated ? raw.slice(1) : raw)[lower ? "toLowerCase" : "toString"]();
    if (matchPattern(text, pattern)) {
      if (negated) return -1;
      positive = true;
    }
  }
  return positive ? 1 : 0;
}
