// Scenario G over SSH: git URL sources are fetched on the remote host into a URL-keyed cache;
// revision "" checks out the default branch, a branch name that branch, a sha a detached HEAD;
// the subdirectory becomes the workspace root.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { workspaceLayout } from "../../src/remote-agent/layout.js";
import { hostGitSource } from "../support/host-git-source.js";
import { cliDriver, type Driver, removeRoot } from "../support/workspace.js";
import type { CreateInput } from "../../src/contract/schemas.js";
import { hostGit, onHost } from "../support/host-view.js";

function gitInput(workspaceId: string, url: string, revision: string, subdirectory?: string): CreateInput {
  return {
    workspaceId,
    project: { projectId: "git-project", source: { kind: "git", url, revision, ...(subdirectory === undefined ? {} : { subdirectory }) } },
    placement: { kind: "existing" },
  };
}

describe("git URL sources over SSH", () => {
  const s = suite("all");
  let base: string;
  let src: ReturnType<typeof hostGitSource>;
  let d: Driver;

  beforeAll(() => {
    base = s.tmp("paseo-ws-git-");
    src = hostGitSource(base, "git-src");
    s.push(() => src.remove());
    d = cliDriver("git");
    s.push(() => removeRoot(d.root));
  });

  it("G1: the default revision lands on the default branch; the subdirectory is the root", async () => {
    const r = await d.create(gitInput("g-default", src.url, "", "packages/app"));
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "g-default").checkout;
    expect(r.value?.placement.cwd).toBe(join(checkout, "packages", "app"));
    expect(readFileSync(onHost(join(r.value!.placement.cwd, "marker.txt")), "utf8")).toBe("default\n");
    expect(hostGit(checkout, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe("main");
    expect(hostGit(checkout, ["rev-parse", "HEAD"]).trim()).toBe(src.tip);
    expect(hostGit(checkout, ["rev-parse", "--abbrev-ref", "main@{upstream}"]).trim()).toBe("origin/main");
    // origin is the URL, not the host's cache the objects are borrowed from.
    expect(hostGit(checkout, ["remote", "-v"])).toBe(`origin\t${src.url} (fetch)\norigin\t${src.url} (push)\n`);
    expect(r.value?.state.lifecycleEnvironment?.PASEO_BRANCH_NAME).toBe("main");
    expect(JSON.stringify(r.value)).not.toContain(src.url);
    expect((await d.op("merge-to-base", "g-default")).message).toBe(
      "merge-to-base needs a workspace created from a directory source on a local branch: g-default",
    );
    expect((await d.op("destroy", "g-default")).ok).toBe(true);
  });

  it("G2: a pinned sha checks out detached at that commit", async () => {
    const r = await d.create(gitInput("g-pinned", src.url, src.pinned, "packages/app"));
    expect(r.message).toBe("");
    const checkout = workspaceLayout(d.root, "g-pinned").checkout;
    expect(readFileSync(onHost(join(r.value!.placement.cwd, "marker.txt")), "utf8")).toBe("pinned\n");
    expect(hostGit(checkout, ["rev-parse", "HEAD"]).trim()).toBe(src.pinned);
    expect(() => hostGit(checkout, ["symbolic-ref", "-q", "HEAD"])).toThrow();
    expect(r.value?.state.lifecycleEnvironment?.PASEO_BRANCH_NAME).toBe("");
    expect((await d.op("destroy", "g-pinned")).ok).toBe(true);
  });

  it("a branch revision checks out that branch", async () => {
    const r = await d.create(gitInput("g-branch", src.url, "main"));
    expect(r.value?.placement.cwd).toBe(workspaceLayout(d.root, "g-branch").checkout);
    expect(hostGit(r.value!.placement.cwd, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe("main");
    expect((await d.op("destroy", "g-branch")).ok).toBe(true);
  });

  it("placements apply to git sources: branch creates a branch at baseRef, checkout of a sha is detached", async () => {
    const branch = await d.create({
      ...gitInput("g-place-b", src.url, ""),
      placement: { kind: "branch", branchName: "feat", baseRef: src.pinned },
    });
    expect(branch.message).toBe("");
    const b = workspaceLayout(d.root, "g-place-b").checkout;
    expect(hostGit(b, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe("feat");
    expect(hostGit(b, ["rev-parse", "HEAD"]).trim()).toBe(src.pinned);
    expect(branch.value?.state.lifecycleEnvironment?.PASEO_BRANCH_NAME).toBe("feat");
    const co = await d.create({ ...gitInput("g-place-c", src.url, ""), placement: { kind: "checkout", ref: src.tip } });
    expect(hostGit(workspaceLayout(d.root, "g-place-c").checkout, ["rev-parse", "HEAD"]).trim()).toBe(src.tip);
    expect(co.value?.state.lifecycleEnvironment?.PASEO_BRANCH_NAME).toBe("");
    for (const id of ["g-place-b", "g-place-c"]) expect((await d.op("destroy", id)).ok).toBe(true);
  });

  it("an unknown revision fails and leaves nothing", async () => {
    const r = await d.create(gitInput("g-unknown", src.url, "no-such-branch"));
    expect(r.message).toBe("Git revision not found at the source: no-such-branch");
    expect(existsSync(onHost(workspaceLayout(d.root, "g-unknown").dir))).toBe(false);
  });

  it("a subdirectory escaping the checkout is refused before anything is created", async () => {
    const r = await d.create(gitInput("g-escape", src.url, "", "../x"));
    expect(r.message).toBe("Workspace cwd escapes its root");
    expect(existsSync(onHost(workspaceLayout(d.root, "g-escape").dir))).toBe(false);
  });
});
