import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { MockSegmentSource } from "@allot/core";
import { CachingAllocator, PYTORCH_SEGMENTS } from "./caching_allocator.ts";
import {
  flattenMemoryStats,
  formatMemorySummary,
  formatSize,
  STAT_ARRAY_NAMES,
} from "./stats.ts";

describe("stats", () => {
  it("formatSize() switches units at 1 KiB, 1 MiB and 1 GiB", () => {
    assert.equal(formatSize(1023), "1023 bytes");
    assert.equal(formatSize(1024), "1.00 KiB");
    assert.equal(formatSize(2 ** 20), "1.00 MiB");
    assert.equal(formatSize(2 ** 30 * 3), "3.00 GiB");
    assert.equal(formatSize(Infinity), "unlimited");
  });

  it("flattenMemoryStats() writes PyTorch's keys for every figure and pool", () => {
    const allocator = new CachingAllocator(
      new MockSegmentSource(),
      PYTORCH_SEGMENTS,
    );
    allocator.allocate(3 * 2 ** 20).release();
    const flat = flattenMemoryStats(allocator.memoryStats());
    assert.equal(
      Object.keys(flat).length,
      STAT_ARRAY_NAMES.length * 3 * 4 + 2 * 4 + 6,
    );
    assert.equal(flat["reserved_bytes.large_pool.current"], 20 * 2 ** 20);
    assert.equal(flat["inactive_split_bytes.all.peak"], 17 * 2 ** 20);
    assert.equal(flat["num_device_alloc"], 1);
    assert.equal(flat["active.all.freed"], 1);
  });

  it("formatMemorySummary() prints one row per figure and pool", () => {
    const allocator = new CachingAllocator(
      new MockSegmentSource(),
      PYTORCH_SEGMENTS,
    );
    allocator.allocate(100).release();
    const text = formatMemorySummary(allocator.memoryStats(), { title: "t" });
    const lines = text.split("\n");
    assert.ok(lines.every((l) => l.length === lines[0].length), "aligned");
    assert.equal(lines.filter((l) => l.includes("from small pool")).length, 9);
    const short = formatMemorySummary(allocator.memoryStats(), {
      abbreviated: true,
    });
    assert.ok(!short.includes("from small pool"));
  });
});
