/**
 * Fourth outside-in review of `@allot/core`: option bags of the helpers
 * every allocator builds on. `recordHistory({ maxEntrys: 10 })` kept 10,000
 * entries, `new LeakDetector({ onleak })` reported nothing,
 * `captureCallStack({ maxFrame: 2 })` took 64 frames, silently. Unknown
 * keys are refused now with an `InvalidArgumentError` naming the key and
 * the accepted ones. (`formatMemorySummary` and `validateSynchronizeOptions`
 * too: see tests/conformance/summary_keys_conformance_test.ts.)
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  captureCallStack,
  collectByAge,
  InvalidArgumentError,
  LeakDetector,
  MockSegmentSource,
  TraceRecorder,
  validateMemorySummaryOptions,
  validateSynchronizeOptions,
} from "./mod.ts";

function isKeyError(key: string): (e: unknown) => boolean {
  return (e: unknown) =>
    e instanceof InvalidArgumentError && e.message.includes(`"${key}"`) &&
    Array.isArray(e.limit);
}

describe("core fourth review", () => {
  it("TraceRecorder, LeakDetector, MockSegmentSource, captureCallStack() and collectByAge() refuse unknown option keys", () => {
    assert.throws(
      () => new TraceRecorder({ maxEntrys: 10 } as never),
      isKeyError("maxEntrys"),
    );
    assert.throws(
      () => new LeakDetector({ onleak: () => {} } as never),
      isKeyError("onleak"),
    );
    assert.throws(
      () => captureCallStack({ maxFrame: 2 } as never),
      isKeyError("maxFrame"),
    );
    let released = 0;
    assert.throws(
      () =>
        collectByAge([1], [1], [8], 8, () => {
          released++;
          return true;
        }, { stopAtTraget: true } as never),
      isKeyError("stopAtTraget"),
    );
    assert.equal(released, 0);
    assert.throws(
      () => new MockSegmentSource({ capacity: 1 << 20 } as never),
      isKeyError("capacity"),
    );
    assert.ok(new TraceRecorder({ maxEntries: 10, captureStack: false }));
    assert.ok(new LeakDetector({ onLeak: () => {}, captureStack: false }));
    assert.ok(captureCallStack({ maxFrames: 2, skipFrames: 0 }).length <= 2);
  });

  it("validateMemorySummaryOptions() and validateSynchronizeOptions() refuse unknown keys", () => {
    assert.throws(
      () => validateMemorySummaryOptions({ abrev: true }),
      isKeyError("abrev"),
    );
    assert.throws(
      () => validateSynchronizeOptions({ signl: undefined }),
      isKeyError("signl"),
    );
    validateMemorySummaryOptions({ title: "t", abbreviated: true });
    assert.equal(validateSynchronizeOptions({ signal: undefined }), undefined);
  });
});
