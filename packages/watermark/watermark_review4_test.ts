/**
 * Fourth outside-in review of `@allot/watermark`: `allocateBuffer(n, {
 * pol: "shared" })` (a misspelt `pool`) gave a private buffer, silently.
 * Unknown option keys are refused now, naming the key and the accepted
 * ones, and nothing is allocated.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError, MockSegmentSource } from "@allot/core";
import { WatermarkAllocator } from "./mod.ts";

function isKeyError(key: string): (e: unknown) => boolean {
  return (e: unknown) =>
    e instanceof InvalidArgumentError && e.message.includes(`"${key}"`) &&
    Array.isArray(e.limit);
}

describe("watermark fourth review", () => {
  it("WatermarkAllocator.allocateBuffer() and allocateBufferAsync() refuse unknown option keys, allocating nothing", async () => {
    const source = new MockSegmentSource({ capacityBytes: 1 << 24 });
    const allocator = new WatermarkAllocator(source);
    assert.throws(
      () => allocator.allocateBuffer(64, { pol: "shared" } as never),
      isKeyError("pol"),
    );
    // signal belongs to the async verb only
    assert.throws(
      () => allocator.tryAllocateBuffer(64, { signal: undefined } as never),
      isKeyError("signal"),
    );
    await assert.rejects(
      allocator.allocateBufferAsync(64, { pol: "shared" } as never),
      isKeyError("pol"),
    );
    assert.equal(allocator.stats().numAllocations, 0);
    assert.equal(source.allocationCount, 0);
    const shared = await allocator.allocateBufferAsync(64, {
      pool: "shared",
      signal: new AbortController().signal,
    });
    allocator.allocateBuffer(64, { pool: "private" }).release();
    shared.release();
  });
});
