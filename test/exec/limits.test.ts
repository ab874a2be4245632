// Large or hostile input to the exec wrapper over the real sshd: memory stays bounded whatever a
// writer does, and what cannot be handled fails with one clear line.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecWorkspace, flood } from "../support/exec.js";

const MiB = 1024 * 1024;

describe("exec under large or hostile input", () => {
  const ws = new ExecWorkspace("exec-limits");
  beforeAll(() => ws.create());
  afterAll(() => ws.cleanup());

  it("fd3: 400 MB without a newline is refused at the line bound; the wrapper's memory stays bounded", async () => {
    const h = ws.start({ argv: ["/bin/true"] }, { rawEnvelope: "", keepControlOpen: true });
    const { written, maxRss } = await flood(h.control, h.child.pid!, 400 * MiB, Buffer.alloc(MiB, "a"));
    h.control.end();
    const r = await h.done;
    console.log(
      `fd3 flood: ${(written / MiB).toFixed(0)} MiB written before the wrapper stopped reading; max wrapper RSS ${(maxRss / MiB).toFixed(0)} MiB`,
    );
    expect(r.stderr.trim()).toBe("fd3 control frame exceeds 16 MiB without a newline");
    expect(r.code).toBe(2);
    expect(r.fd4).toBe("");
    expect(maxRss).toBeLessThan(150 * MiB);
  });
});
