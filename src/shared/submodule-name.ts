// Which submodule names may become a directory under `.git/modules/` (git's check_submodule_name,
// made stricter): shared by the runtime, which leaves other submodules uninitialised, and the
// agent, which refuses a request naming one.

/** No empty, "." or ".." component, not absolute, no backslash, NUL or line break. */
export function isSafeSubmoduleName(name: string): boolean {
  if (name === "" || name.startsWith("/") || /[\\\0\n\r]/.test(name)) return false;
  return name.split("/").every((part) => part !== "" && part !== "." && part !== "..");
}
