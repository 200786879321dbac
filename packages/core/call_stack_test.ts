import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  captureCallStack,
  formatCallStack,
  isAllotFrame,
} from "./call_stack.ts";
import { TraceRecorder } from "./memory_snapshot.ts";

function nest(depth: number, fn: () => string[]): string[] {
  return depth === 0 ? fn() : nest(depth - 1, fn);
}

describe("call stacks", () => {
  it("captureCallStack() keeps more than V8's default 10 frames and restores the limit", () => {
    const limit = (Error as { stackTraceLimit?: number }).stackTraceLimit;
    const frames = nest(30, () => captureCallStack().map((f) => f.text));
    assert.ok(frames.length >= 30, `${frames.length} frames`);
    assert.match(frames[0], /call_stack_test\.ts/);
    assert.equal(
      (Error as { stackTraceLimit?: number }).stackTraceLimit,
      limit,
    );
  });

  it("isAllotFrame() marks files of allot's packages, not the caller's", () => {
    assert.ok(
      isAllotFrame(`f (${new URL("../caching/x.ts", import.meta.url)}:1:1)`),
    );
    assert.ok(
      isAllotFrame("f (file:///app/node_modules/@allot/core/esm/x.js:1:1)"),
    );
    assert.ok(!isAllotFrame("main (file:///home/me/app/main.ts:3:1)"));
  });

  it("formatCallStack() puts the caller's frames first", () => {
    const text = formatCallStack([
      { text: "a (file:///x/@allot/caching/a.js:1:1)", allot: true },
      { text: "b (file:///x/@allot/caching/b.js:1:1)", allot: true },
      { text: "main (file:///app/main.ts:3:1)", allot: false },
    ]);
    assert.deepEqual(text.split("\n"), [
      "main (file:///app/main.ts:3:1)",
      "[allot] a (file:///x/@allot/caching/a.js:1:1)",
      "[allot] b (file:///x/@allot/caching/b.js:1:1)",
    ]);
  });

  it("TraceRecorder counts the entries it drops and keeps tags", () => {
    const history = new TraceRecorder({ maxEntries: 3 });
    for (let i = 0; i < 10; i++) {
      history.record("alloc", i, 512, 512, 0, `t${i}`);
    }
    assert.equal(history.size, 3);
    assert.equal(history.droppedEntries, 7);
    assert.deepEqual(history.entries().map((e) => e.tag), ["t7", "t8", "t9"]);
    history.clear();
    assert.equal(history.droppedEntries, 0);
  });
});
