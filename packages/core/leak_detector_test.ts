import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { LeakDetector, type LeakReport } from "./leak_detector.ts";
import { UniqueVoidPtr } from "./unique_void_ptr.ts";

const gc = (globalThis as { gc?: () => void }).gc;

async function collect(): Promise<void> {
  for (let i = 0; i < 10; i++) {
    gc!();
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("LeakDetector", () => {
  it("LeakDetector reports a handle dropped without release", {
    skip: gc ? false : "needs --v8-flags=--expose-gc",
  }, async () => {
    const seen: LeakReport[] = [];
    const detector = new LeakDetector({
      onLeak: (r) => seen.push(r),
      captureStack: true,
    });
    let freed = 0;
    (() => {
      const dropped = new UniqueVoidPtr("x", 1, () => freed++);
      detector.watch(dropped, { label: "dropped", byteLength: 128 });
      const released = new UniqueVoidPtr("y", 2, () => freed++);
      detector.watch(released, { label: "released", byteLength: 64 });
      released.clear();
      detector.forget(released);
    })();
    await collect();
    assert.deepEqual(seen.map((r) => r.label), ["dropped"]);
    assert.equal(detector.leakedBytes, 128);
    assert.equal(detector.watching, 0);
    assert.match(seen[0].stack ?? "", /leak_detector_test/);
    assert.equal(freed, 1, "the detector never frees");
  });

  it("LeakDetector.forget() returns false for unknown handles", () => {
    const detector = new LeakDetector();
    assert.equal(detector.forget({}), false);
    const h = {};
    detector.watch(h, { label: "h" });
    detector.watch(h, { label: "h again" });
    assert.equal(detector.watching, 1);
    assert.equal(detector.forget(h), true);
    assert.equal(detector.watching, 0);
  });
});
