import { InvalidArgumentError } from "@allot/core";
import assert from "node:assert/strict";
import { CachingAllocator } from "@allot/caching";
import { MockSegmentSource } from "@allot/core";
import { formatTrace, fromAllocatorSnapshot, parseTrace } from "./mod.ts";

Deno.test("fromAllocatorSnapshot: blocks inside segments, user-first stacks, dropped entries", () => {
  const a = new CachingAllocator(new MockSegmentSource(), {
    recordHistory: { captureStack: true, maxEntries: 8 },
  });
  const blocks = [1000, 2000, 3000].map((n) => a.allocate(n));
  for (const b of blocks) b.release();
  const snap = a.snapshot();
  const trace = parseTrace(formatTrace(fromAllocatorSnapshot(snap, "test")));
  const dropped = trace.events.find((e) => e.op === "dropped");
  assert.equal(dropped?.op === "dropped" && dropped.count, snap.droppedEntries);
  assert.ok((snap.droppedEntries ?? 0) > 0);
  const allocs = trace.events.filter((e) => e.op === "alloc");
  assert.ok(allocs.length > 0);
  const stack = trace.events.find((e) => e.op === "stack");
  assert.ok(stack && stack.op === "stack");
  // this test file lies in packages/: allot's own; every allot frame is marked
  assert.ok(stack.frames.some((f) => f.kind === "allot"));
  const firstOther = stack.frames.findIndex((f) => f.kind !== "user");
  assert.ok(stack.frames.slice(firstOther).every((f) => f.kind !== "user"));
});

Deno.test("fromAllocatorSnapshot: offsets of blocks inside their segment", () => {
  const a = new CachingAllocator(new MockSegmentSource(), {
    recordHistory: true,
  });
  // A free segment, which the next two blocks are carved from (a miss
  // while nothing held is free takes a segment of just the request).
  a.allocate(4096).release();
  const x = a.allocate(1000), y = a.allocate(1000);
  const trace = parseTrace(formatTrace(fromAllocatorSnapshot(a.snapshot())));
  const [ax, ay] = trace.events.filter((e) => e.op === "alloc").slice(-2);
  assert.ok(ax.op === "alloc" && ay.op === "alloc");
  assert.equal(ax.buffer, ay.buffer);
  assert.notEqual(ax.offset, ay.offset);
  x.release(), y.release();
  assert.throws(() => fromAllocatorSnapshot({} as never), InvalidArgumentError);
});
