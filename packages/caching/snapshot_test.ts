import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { TraceRecorder } from "./snapshot.ts";

describe("TraceRecorder", () => {
  it("TraceRecorder keeps the newest events in order when it wraps", () => {
    const history = new TraceRecorder({ maxEntries: 3 });
    for (let i = 0; i < 7; i++) history.record("alloc", i, 512, 1, 0);
    assert.equal(history.size, 3);
    assert.deepEqual(history.entries().map((e) => e.address), [4, 5, 6]);
    const times = history.entries().map((e) => e.timeMs);
    assert.deepEqual(times, [...times].sort((a, b) => a - b));
    history.clear();
    assert.equal(history.size, 0);
  });

  it("TraceRecorder refuses a capacity that is not a positive integer", () => {
    assert.throws(() => new TraceRecorder({ maxEntries: 0 }), /maxEntries/);
    assert.throws(() => new TraceRecorder({ maxEntries: 1.5 }), /maxEntries/);
  });

  it("TraceRecorder captures stacks when asked", () => {
    const history = new TraceRecorder({ captureStack: true });
    history.record("oom", 0, 512, 512, 0);
    assert.match(history.entries()[0].stack!, /snapshot_test/);
  });
});
