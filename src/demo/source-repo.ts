// The project the demo materializes: the git repository around the current directory, or a small
// generated repository when there is none. It also picks what the tour checks remotely: a
// committed file (its HEAD bytes) and an untracked one that must not arrive.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { RuntimeError } from "../shared/errors.js";

export interface DemoSource {
  /** Repository root on this machine (the create input's directory source). */
  path: string;
  branch: string;
  /** HEAD commit id. */
  head: string;
  /** A committed file and its bytes at HEAD. */
  committedFile: string;
  committedBytes: Buffer;
  /** Repo-relative path of a file that exists here but is not committed. */
  untrackedFile: string;
  generated: boolean;
  /** Creates the untracked file if the demo has to provide one; call right before create. */
  placeUntracked(): void;
  /** Removes whatever the demo created here (the generated repo, or its untracked file). */
  cleanup(): void;
}

const GIT_TIMEOUT_MS = 30_000;

function git(cwd: string, args: string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", timeout: GIT_TIMEOUT_MS, stdio: ["ignore", "pipe", "pipe"] });
}

function gitBytes(cwd: string, args: string[]): Buffer {
  return execFileSync("git", args, { cwd, timeout: GIT_TIMEOUT_MS, stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 << 20 });
}

function repoRoot(cwd: string): string | undefined {
  try {
    return git(cwd, ["rev-parse", "--show-toplevel"]).trim();
  } catch {
    return undefined;
  }
}

/** A small committed regular file, preferring README.md. */
function pickCommittedFile(root: string): string {
  const entries = git(root, ["ls-tree", "-r", "-l", "-z", "HEAD"])
    .split("\0")
    .filter(Boolean)
    .map((line) => {
      const [meta, path] = line.split("\t");
      const [mode, type, , size] = meta!.trim().split(/\s+/);
      return { path: path!, mode, type, size: Number(size) };
    })
    .filter((e) => e.type === "blob" && (e.mode === "100644" || e.mode === "100755") && e.size > 0 && e.size < 1_000_000);
  const readme = entries.find((e) => /^readme(\.md)?$/i.test(e.path));
  const chosen = readme ?? entries[0];
  if (!chosen) throw new RuntimeError("input", `${root} has no committed regular file to show`);
  return chosen.path;
}

/** An existing untracked (or ignored) file, so the demo need not touch the user's tree. */
function findUntracked(root: string): string | undefined {
  const list = (args: string[]) =>
    git(root, ["ls-files", "--others", "--exclude-standard", ...args, "-z"])
      .split("\0")
      .filter(Boolean);
  // --directory keeps an ignored tree such as node_modules/ to one entry.
  return list([])[0] ?? list(["--ignored", "--directory"])[0];
}

function fromRepository(root: string): DemoSource {
  let branch: string;
  let head: string;
  try {
    head = git(root, ["rev-parse", "--verify", "HEAD^{commit}"]).trim();
    branch = git(root, ["symbolic-ref", "--short", "HEAD"]).trim();
  } catch {
    throw new RuntimeError("input", `${root}: the demo needs a repository with a commit checked out on a branch`);
  }
  const committedFile = pickCommittedFile(root);
  const existing = findUntracked(root);
  const untrackedFile = existing ?? `.paseo-demo-untracked-${randomBytes(4).toString("hex")}`;
  let placed = false;
  return {
    path: root,
    branch,
    head,
    committedFile,
    committedBytes: gitBytes(root, ["cat-file", "blob", `HEAD:${committedFile}`]),
    untrackedFile,
    generated: false,
    placeUntracked() {
      if (existing !== undefined || placed) return;
      writeFileSync(join(root, untrackedFile), "must-not-enter-runtime\n", { flag: "wx" });
      placed = true;
    },
    cleanup() {
      if (placed) rmSync(join(root, untrackedFile), { force: true });
    },
  };
}

function generated(tmpDir: string): DemoSource {
  const root = join(tmpDir, "sample-project");
  mkdirSync(root, { recursive: true });
  git(root, ["init", "-q", "-b", "main"]);
  writeFileSync(join(root, "README.md"), "# Sample project\n\nMaterialized on the remote host by paseo-ssh-runtime demo.\n");
  writeFileSync(join(root, "hello.sh"), "#!/bin/sh\necho hello from the workspace\n", { mode: 0o755 });
  git(root, ["add", "README.md", "hello.sh"]);
  git(root, [
    "-c",
    "user.name=Paseo Demo",
    "-c",
    "user.email=demo@paseo.invalid",
    "-c",
    "commit.gpgsign=false",
    "commit",
    "-q",
    "-m",
    "Sample project",
  ]);
  writeFileSync(join(root, ".env"), "must-not-enter-runtime\n");
  return { ...fromRepository(root), generated: true };
}

/**
 * The repository around `cwd`, or a generated sample under `tmpDir` (removed with it) when there is
 * none or it cannot be shown as is (no commit, detached HEAD); `note` then says why.
 */
export function prepareSource(cwd: string, tmpDir: string): { source: DemoSource; note?: string } {
  const root = repoRoot(cwd);
  if (!root) return { source: generated(tmpDir) };
  try {
    return { source: fromRepository(root) };
  } catch (err) {
    if (!(err instanceof RuntimeError)) throw err;
    return { source: generated(tmpDir), note: `${err.message}; using a generated sample repository instead` };
  }
}
