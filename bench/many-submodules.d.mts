// Types for many-submodules.mjs, so TypeScript tests can build the many-submodules fixture.
export const MANY_ORIGIN: string;
export function moduleName(i: number): string;
export function manySubmodules(
  dir: string,
  n: number,
  opts?: { available?: boolean },
): { path: string; commit: string; modules: Array<{ name: string; path: string; commit: string; file: string }> };
