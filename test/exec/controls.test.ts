// The fd3 reader's bounds, without SSH: past the envelope timeout nothing more is read, and a
// line longer than the bound is refused (the rig suite limits.test.ts shows the memory bound).
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ENVELOPE_TIMEOUT_MS, MAX_CONTROL_LINE, readControls } from "../../src/exec/controls.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("fd3 control reader bounds", () => {
  it("stops reading fd3 once the envelope timeout has passed", async () => {
    vi.useFakeTimers();
    const fd3 = new PassThrough();
    const reader = readControls(fd3);
    fd3.write('{"type":"spawn"');
    vi.advanceTimersByTime(ENVELOPE_TIMEOUT_MS);
    await expect(reader.envelope).rejects.toThrow(`no spawn envelope on fd3 within ${ENVELOPE_TIMEOUT_MS} ms`);
    expect(fd3.destroyed).toBe(true);
  });

  it("refuses a line as soon as it exceeds the bound, within one chunk", async () => {
    const fd3 = new PassThrough();
    const reader = readControls(fd3);
    fd3.write(Buffer.concat([Buffer.from("x".repeat(10)), Buffer.alloc(MAX_CONTROL_LINE - 5, "a")]));
    await expect(reader.envelope).rejects.toThrow("fd3 control frame exceeds 16 MiB without a newline");
    expect(fd3.destroyed).toBe(true);
  });
});
