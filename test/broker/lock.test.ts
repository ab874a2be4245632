// The broker lock between processes of one user. Unit tests: the race (two processes judging
// the same stale lock at once) cannot be produced on demand by a real sshd, so one contender is
// held between its judgement and its action through the lock's test seam.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeEach, describe, expect, it } from "vitest";
import { suite } from "../support/suite.js";
import { withLock } from "../../src/broker/common/lock.js";

const s = suite();
let dir = "";
beforeEach(() => {
  dir = s.tmp("paseo-lock-");
});

/** A pid that certainly belongs to no live process (a child that has exited and been reaped). */
function deadPid(): number {
  return Number(spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).stdout.toString());
}

/** Leaves a lock as a crashed holder would: its pid gone, and old by any measure. */
function plantStale(path: string): void {
  writeFileSync(path, `${deadPid()} 00000000deadbeef\n`);
  const old = new Date(Date.now() - 3600_000);
  utimesSync(path, old, old);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("broker lock", () => {
  it("two processes judging the same stale lock never both hold it", async () => {
    const path = join(dir, "k.lock");
    plantStale(path);
    let inside = 0;
    let overlap = false;
    const critical = async (ms: number) => {
      inside++;
      if (inside > 1) overlap = true;
      await sleep(ms);
      inside--;
    };
    let judged!: () => void;
    const bJudged = new Promise<void>((r) => (judged = r));
    let resumeB!: () => void;
    const bHeld = new Promise<void>((r) => (resumeB = r));
    // B judges the planted lock stale, then stalls (descheduled) before acting on it.
    const b = withLock(path, () => critical(50), {
      afterJudgedStale: () => {
        judged();
        return bHeld;
      },
    });
    await bJudged;
    // Meanwhile A takes the stale lock over and holds its fresh lock while B acts on its judgement.
    const a = withLock(path, async () => {
      resumeB();
      await sleep(50);
      await critical(300);
    });
    await Promise.all([a, b]);
    expect(overlap).toBe(false);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("a lock whose holder is alive and recent is waited for, then taken; nothing is left behind", async () => {
    const path = join(dir, "k.lock");
    const order: string[] = [];
    const first = withLock(path, async () => {
      order.push("a-in");
      await sleep(200);
      order.push("a-out");
    });
    await sleep(20);
    const second = withLock(path, async () => {
      order.push("b-in");
    });
    await Promise.all([first, second]);
    expect(order).toEqual(["a-in", "a-out", "b-in"]);
    expect(existsSync(path)).toBe(false);
    expect(readdirSync(dir)).toEqual([]);
  });
});
