// Fixture of the many-submodules row (issue 30 item 13) and of the real-sshd test that checks every
// submodule of such a superproject: `n` submodules, each its own small repository (one commit, two
// files, loose objects) kept where `git submodule update --init` keeps it (`.git/modules/<name>`),
// all recorded under `mods/` of one superproject commit. Written as git objects directly (no git
// process per submodule: 1,000 submodules take a second, not minutes). `available: false` gives the
// same superproject commit with none of the submodules' objects: what "the superproject alone" costs.
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { deflateSync } from "node:zlib";

/** The superproject's origin: unreachable, it only anchors the submodules' relative URLs. */
export const MANY_ORIGIN = "https://git.example.invalid/org/many.git";
/** Fixed dates, so both variants (and every run) give the same commits. */
const WHEN = "1767225600 +0000";
const IDENT = "bench <bench@example.invalid>";

/** Writes one loose object into `objects` and returns its id. */
function put(objects, type, body) {
  const data = Buffer.concat([Buffer.from(`${type} ${body.length}\0`), body]);
  const id = createHash("sha1").update(data).digest("hex");
  const dir = join(objects, id.slice(0, 2));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, id.slice(2)), deflateSync(data, { level: 1 }));
  return id;
}

/** A tree of entries already in git's order: [mode, name, id]. */
function tree(objects, entries) {
  return put(
    objects,
    "tree",
    Buffer.concat(entries.flatMap(([mode, name, id]) => [Buffer.from(`${mode} ${name}\0`), Buffer.from(id, "hex")])),
  );
}

function commit(objects, treeId, message) {
  const text = `tree ${treeId}\nauthor ${IDENT} ${WHEN}\ncommitter ${IDENT} ${WHEN}\n\n${message}\n`;
  return put(objects, "commit", Buffer.from(text));
}

/** A git dir with `objects` of its own, HEAD detached at `head` (and `main` at it). */
function gitDir(dir, head, config) {
  mkdirSync(join(dir, "refs", "heads"), { recursive: true });
  mkdirSync(join(dir, "refs", "tags"), { recursive: true });
  mkdirSync(join(dir, "objects", "info"), { recursive: true });
  mkdirSync(join(dir, "objects", "pack"), { recursive: true });
  writeFileSync(join(dir, "HEAD"), `${head}\n`);
  writeFileSync(join(dir, "config"), config);
}

export const moduleName = (i) => `m${String(i).padStart(5, "0")}`;

/**
 * Builds the superproject in `dir`: { path, commit, modules: [{ name, path, commit, file }] }, where
 * `file` is the content of the submodule's `README` (unique per submodule).
 */
export function manySubmodules(dir, n, { available = true } = {}) {
  const git = join(dir, ".git");
  const objects = join(git, "objects");
  mkdirSync(objects, { recursive: true });
  const modules = [];
  const links = [];
  for (let i = 0; i < n; i++) {
    const name = moduleName(i);
    const file = `submodule ${name}\n`;
    // Not available: the submodule's objects are written nowhere the runtime looks.
    const modGit = available ? join(git, "modules", name) : join(dir, "elsewhere", name);
    const modObjects = join(modGit, "objects");
    const readme = put(modObjects, "blob", Buffer.from(file));
    const license = put(modObjects, "blob", Buffer.from(`licence of ${name}\n`));
    const root = tree(modObjects, [
      ["100644", "LICENSE", license],
      ["100644", "README", readme],
    ]);
    const c = commit(modObjects, root, `${name} content`);
    modules.push({ name, path: `mods/${name}`, commit: c, file });
    links.push(["160000", name, c]);
    if (available) {
      gitDir(modGit, c, `[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ../../../mods/${name}\n`);
      writeFileSync(join(modGit, "refs", "heads", "main"), `${c}\n`);
      mkdirSync(join(dir, "mods", name), { recursive: true });
      writeFileSync(join(dir, "mods", name, ".git"), `gitdir: ../../.git/modules/${name}\n`);
    }
  }
  const gitmodules = modules.map((m) => `[submodule "${m.name}"]\n\tpath = ${m.path}\n\turl = ../${m.name}.git\n`).join("");
  const top = put(objects, "blob", Buffer.from("top\n"));
  const gm = put(objects, "blob", Buffer.from(gitmodules));
  const mods = tree(objects, links);
  const root = tree(objects, [
    ["100644", ".gitmodules", gm],
    ["40000", "mods", mods],
    ["100644", "top.txt", top],
  ]);
  const c = commit(objects, root, `superproject with ${n} submodules`);
  gitDir(
    git,
    "ref: refs/heads/main",
    `[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n[remote "origin"]\n\turl = ${MANY_ORIGIN}\n`,
  );
  writeFileSync(join(git, "refs", "heads", "main"), `${c}\n`);
  writeFileSync(join(dir, "top.txt"), "top\n");
  writeFileSync(join(dir, ".gitmodules"), gitmodules);
  return { path: dir, commit: c, modules };
}
