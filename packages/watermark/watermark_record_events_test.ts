/**
 * `WatermarkAllocator.recordEvents()` with hostile `buffers` (one buffer
 * instead of an array, null, a string, traps): refused with a typed error,
 * recording nothing (#17 item 8).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  InvalidArgumentError,
  ManualStream,
  MockSegmentSource,
} from "@allot/core";
import { WatermarkAllocator } from "./mod.ts";
import { assertRefusesAll, hostileObjects } from "../core/_test_hostile.ts";

describe("WatermarkAllocator.recordEvents() adversarial", () => {
  it("WatermarkAllocator.recordEvents() refuses a single buffer or any non-array, recording nothing", () => {
    const allocator = new WatermarkAllocator(
      new MockSegmentSource({ capacityBytes: 1 << 22 }),
    );
    const stream = new ManualStream();
    const a = allocator.allocateBuffer(64);
    const state = () => [
      stream.submitted,
      JSON.stringify(allocator.stats()),
    ];
    assertRefusesAll(
      "WatermarkAllocator.recordEvents(buffers)",
      [
        { name: "one buffer", value: a },
        ...hostileObjects().filter((h) => h.name !== "[]"),
      ],
      (v) => allocator.recordEvents(v as [typeof a], stream),
      { error: InvalidArgumentError, snapshot: state },
    );
    a.release(); // nothing was recorded: freed at once
    assert.equal(allocator.stats().pendingFreeBytes, 0);
  });
});
