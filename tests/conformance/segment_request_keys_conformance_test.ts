/**
 * Found in the fourth outside-in review: a segment source's
 * `tryAllocateSegment(n, { resizeable: true })` (a misspelt `resizable`)
 * made a fixed-size segment, silently. Every segment source refuses an
 * unknown key of `SegmentRequestOptions` now, naming it and the accepted
 * ones, and makes nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { InvalidArgumentError, MockSegmentSource } from "@allot/core";
import { HostSegmentSource } from "@allot/cpu";
import { GpuSegmentSource } from "@allot/webgpu";
import { mockGpu } from "./_mock_gpu.ts";

const gpu = mockGpu();
const sources = {
  MockSegmentSource: () => new MockSegmentSource({ capacityBytes: 1 << 20 }),
  HostSegmentSource: () => new HostSegmentSource({ capacityBytes: 1 << 20 }),
  GpuSegmentSource: () => new GpuSegmentSource(gpu.device),
};

for (const [name, make] of Object.entries(sources)) {
  Deno.test(`${name}.tryAllocateSegment() refuses an unknown option key such as resizeable`, () => {
    const source = make();
    for (const key of ["resizeable", "hostvisible", "labell"]) {
      assert.throws(
        () => source.tryAllocateSegment(4096, { [key]: true } as never),
        (e: unknown) =>
          e instanceof InvalidArgumentError &&
          e.message.includes(`"${key}"`) && Array.isArray(e.limit),
      );
    }
    assert.equal(source.reservedBytes, 0);
    const segment = source.tryAllocateSegment(4096, { hostVisible: false });
    assert.ok(segment);
    source.freeSegment(segment as never);
  });
}
