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
import { AllocationStrategy, BufferView } from "@allot/storage";
import { deviceBudget, GpuStaging } from "@allot/webgpu";
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
