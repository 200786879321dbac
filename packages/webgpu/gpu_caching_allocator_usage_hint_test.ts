// A `usage` option given to GpuCachingAllocator itself (the commonest guess
// of a user writing a harness from the README; found writing
// bench/outside/replay.ts) is refused with a message that says where a usage
// goes, and the refusal joins no group.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { GpuCachingAllocator } from "./gpu_caching_allocator.ts";
import { mockGpu } from "./_test_mock_device.ts";

describe("GpuCachingAllocator usage option", () => {
  it("a top-level usage is refused with a hint to source.usage and forUsage, joining no group", () => {
    const gpu = mockGpu();
    const group = GpuCachingAllocator.deviceGroup(gpu.device);
    const before = group.size;
    assert.throws(
      () => new GpuCachingAllocator(gpu.device, { usage: 128 } as never),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        e.argument === "usage" &&
        /source: \{ usage \}/.test(e.message) &&
        /forUsage/.test(e.message),
    );
    assert.equal(group.size, before);
    // the place the hint names works
    const a = new GpuCachingAllocator(gpu.device, { source: { usage: 128 } });
    assert.equal(a.source.usage, 128);
  });
});
