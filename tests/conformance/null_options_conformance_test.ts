/**
 * The rule for `null` in options (README.md) at the option-taking entry
 * points beside the allocators: `null` for an optional number is refused
 * with an `InvalidArgumentError` naming it, never read as "not given".
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  captureCallStack,
  InvalidArgumentError,
  TraceRecorder,
} from "@allot/core";
import { AllocationStrategy, BufferPool, BufferView } from "@allot/storage";
import { CpuHeap, SystemAllocator } from "@allot/cpu";
import { CachingAllocator } from "@allot/caching";
import { WatermarkAllocator } from "@allot/watermark";
import { MockSegmentSource } from "@allot/core";
import { deviceBudget, GpuSegmentSource, GpuStaging } from "@allot/webgpu";
import { mockGpu } from "./_mock_gpu.ts";

const cases: [string, () => unknown][] = [
  [
    "captureCallStack({ maxFrames: null })",
    () => captureCallStack({ maxFrames: null as never }),
  ],
  [
    "captureCallStack({ skipFrames: null })",
    () => captureCallStack({ skipFrames: null as never }),
  ],
  [
    "new TraceRecorder({ maxEntries: null })",
    () => new TraceRecorder({ maxEntries: null as never }),
  ],
  [
    "AllocationStrategy.pooled({ minByteLength: null })",
    () => AllocationStrategy.pooled({ minByteLength: null as never }),
  ],
  [
    "new BufferView([4], { offset: null })",
    () => new BufferView([4], { offset: null as never }),
  ],
  ...(["start", "stop", "step"] as const).map((
    key,
  ): [string, () => unknown] => [
    `BufferView.slice(0, { ${key}: null })`,
    () => BufferView.contiguous([4]).slice(0, { [key]: null as never }),
  ]),
  [
    "deviceBudget(device, { hostShare: null })",
    () => deviceBudget(mockGpu().device, { hostShare: null as never }),
  ],
  ...["maxStagingBytes", "chunkByteLength", "writeBufferMaxByteLength"].map((
    key,
  ): [string, () => unknown] => [
    `new GpuStaging(device, { ${key}: null })`,
    () => new GpuStaging(mockGpu().device, { [key]: null as never }),
  ]),
  // options that take a string, object or function: the same rule
  [
    "new CpuHeap(n, { placement: null })",
    () => new CpuHeap(4096, { placement: null as never }),
  ],
  [
    "new CachingAllocator(source, { recordHistory: null })",
    () =>
      new CachingAllocator(new MockSegmentSource(), {
        recordHistory: null as never,
      }),
  ],
  ...["recordHistory", "logger", "hostView"].map((
    key,
  ): [string, () => unknown] => [
    `new WatermarkAllocator(source, { ${key}: null })`,
    () => new WatermarkAllocator(new MockSegmentSource(), { [key]: null }),
  ]),
  [
    "new BufferPool(allocator, { strategy: null })",
    () => new BufferPool(new SystemAllocator(), { strategy: null as never }),
  ],
  [
    "new GpuSegmentSource(device, { hostVisible: null })",
    () =>
      new GpuSegmentSource(mockGpu().device, { hostVisible: null as never }),
  ],
];

for (const [name, call] of cases) {
  Deno.test(`${name} is refused, naming null`, () => {
    assert.throws(call, (e: unknown) => {
      assert.ok(e instanceof InvalidArgumentError, String(e));
      assert.match(e.message, /null/);
      return true;
    });
  });
}

Deno.test("WatermarkAllocator refuses a logger or hostView that is no function", () => {
  for (const key of ["logger", "hostView"]) {
    for (const value of [5, "log", {}]) {
      assert.throws(
        () => new WatermarkAllocator(new MockSegmentSource(), { [key]: value }),
        (e: unknown) =>
          e instanceof InvalidArgumentError && e.message.includes(key),
      );
    }
  }
});
