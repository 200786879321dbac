import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  formatStatsSummary,
  InvalidArgumentError,
  validateOptionKeys,
} from "./mod.ts";

const v = (
  current: number,
  peak = current,
  allocated = current,
  freed = 0,
) => ({
  current,
  peak,
  allocated,
  freed,
});

describe("formatStatsSummary", () => {
  it("prints each StatValues figure as a row, per pool unless abbreviated, numbers above", () => {
    const stats = {
      requestedBytes: { all: v(3072), smallPool: v(1024), largePool: v(2048) },
      allocations: v(3, 5, 9, 6),
      segmentCount: 2,
      reservedBytes: 4096,
      label: "ignored",
    };
    const full = formatStatsSummary(stats, { title: "t" });
    assert.match(full, /\| t +\|/);
    assert.match(full, /segment count: 2; reserved bytes: 4\.00 KiB/);
    assert.match(full, /Requested bytes +\| +3\.00 KiB/);
    assert.match(full, /from small pool +\| +1\.00 KiB/);
    assert.match(full, /Allocations +\| +3\| +5\| +9\| +6\|/);
    assert.doesNotMatch(full, /ignored/);
    const short = formatStatsSummary(stats, { abbreviated: true });
    assert.doesNotMatch(short, /from small pool/);
    assert.match(short, /allot memory summary/);
    for (const line of full.split("\n")) assert.equal(line.length, 79);
  });

  it("refuses options of the wrong type and a stats that is no object", () => {
    for (const bad of [null, 5, { title: 5 }, { abbreviated: 1 }]) {
      assert.throws(
        () => formatStatsSummary({}, bad as never),
        InvalidArgumentError,
      );
    }
    assert.throws(
      () => formatStatsSummary(null as never),
      InvalidArgumentError,
    );
  });
});

describe("validateOptionKeys", () => {
  it("takes the accepted keys, refuses another naming it, leaves non-objects to the caller", () => {
    validateOptionKeys({ a: 1, b: undefined }, ["a", "b"], "X");
    validateOptionKeys(null as never, ["a"], "X");
    let reads = 0;
    const getter = {
      get a() {
        reads++;
        return 1;
      },
    };
    validateOptionKeys(getter, ["a"], "X");
    assert.equal(reads, 0, "no getter runs");
    assert.throws(
      () => validateOptionKeys({ a: 1, c: 2 }, ["a", "b"], "X"),
      (e: unknown) =>
        e instanceof InvalidArgumentError && /"c" of X/.test(e.message) &&
        /a, b/.test(e.message),
    );
  });
});
