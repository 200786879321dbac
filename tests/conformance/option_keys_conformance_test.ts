/**
 * The rule for option names, run against every allocator's constructor: an
 * unknown key (a typo, or an older name) is refused with an
 * `InvalidArgumentError` that names the key and lists the accepted ones;
 * nothing is made (no GPU buffer); every accepted key is still taken.
 *
 * @module
 */

import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import {
  CpuAllocator,
  CpuHeap,
  HostSegmentSource,
  ProfiledMemoryReporter,
  SystemAllocator,
} from "@allot/cpu";
import { BuddyAllocator } from "@allot/buddy";
import {
  CachingAllocator,
  StepPlannedPool,
  StepPoolGroup,
} from "@allot/caching";
import { WatermarkAllocator } from "@allot/watermark";
import { BufferPool, ManagedBufferPool } from "@allot/storage";
import { SharedHeap } from "@allot/threads";
import { OwnershipRegistry } from "@allot/registry";
import {
  GpuCachingAllocator,
  GpuPlannedAllocator,
  GpuSegmentSource,
  GpuWatermarkAllocator,
} from "@allot/webgpu";
import { mockGpu } from "./_mock_gpu.ts";

const KiB = 1024;
const host = () => new HostSegmentSource({ capacityBytes: 4 * 2 ** 20 });

/** One constructor: how to make it with options, and a key it reads. */
interface KeyCase {
  name: string;
  /** A key the constructor reads, with a value it takes. */
  known: [string, unknown];
  make(options: Record<string, unknown>): unknown;
}

const gpu = mockGpu();
const cases: KeyCase[] = [
  {
    name: "CpuHeap",
    known: ["alignment", 16],
    make: (o) => new CpuHeap(new ArrayBuffer(64 * KiB), o).dispose(),
  },
  {
    name: "CpuAllocator",
    known: ["zeroFill", true],
    make: (o) => new CpuAllocator(o),
  },
  {
    name: "SystemAllocator",
    known: ["capacityBytes", KiB],
    make: (o) => new SystemAllocator(o),
  },
  {
    name: "HostSegmentSource",
    known: ["capacityBytes", KiB],
    make: (o) => new HostSegmentSource(o),
  },
  {
    name: "BuddyAllocator",
    known: ["minBlockByteLength", 256],
    make: (o) => new BuddyAllocator(o),
  },
  {
    name: "CachingAllocator",
    known: ["maxSplitByteLength", 64 * 2 ** 20],
    make: (o) => new CachingAllocator(host(), o),
  },
  {
    name: "StepPlannedPool",
    known: ["maxHeldRatio", 2],
    make: (o) => new StepPlannedPool(host(), o).dispose(),
  },
  {
    name: "WatermarkAllocator",
    known: ["highWatermarkRatio", 1.5],
    make: (o) => new WatermarkAllocator(host(), o),
  },
  {
    name: "BufferPool",
    known: ["maxFreeBytes", KiB],
    make: (o) => new BufferPool(new SystemAllocator(), o),
  },
  {
    name: "ManagedBufferPool",
    known: ["maxFreeBytes", KiB],
    make: (o) => new ManagedBufferPool(new SystemAllocator(), o).dispose(),
  },
  {
    name: "SharedHeap",
    known: ["lockTimeoutMs", 100],
    make: (o) => SharedHeap.create(256 * KiB, o).close(),
  },
  {
    name: "OwnershipRegistry",
    known: ["track", true],
    make: (o) => new OwnershipRegistry(o).dispose(),
  },
  {
    name: "GpuSegmentSource",
    known: ["capacityBytes", 2 ** 20],
    make: (o) => new GpuSegmentSource(gpu.device, o),
  },
  {
    name: "GpuCachingAllocator",
    known: ["reuse", "after-fence"],
    make: (o) => new GpuCachingAllocator(gpu.device, o),
  },
  {
    name: "GpuCachingAllocator (a caching option)",
    known: ["maxSplitByteLength", 64 * 2 ** 20],
    make: (o) => new GpuCachingAllocator(gpu.device, o),
  },
  {
    name: "GpuWatermarkAllocator",
    known: ["lowWatermarkRatio", 1],
    make: (o) => new GpuWatermarkAllocator(gpu.device, o),
  },
  {
    name: "GpuPlannedAllocator",
    known: ["maxHeldRatio", 2],
    make: (o) => new GpuPlannedAllocator(gpu.device, o),
  },
  // found in the fourth outside-in review: these two took any key
  {
    name: "StepPoolGroup",
    known: ["maxHeldRatio", 2],
    make: (o) => new StepPoolGroup(o),
  },
  {
    name: "ProfiledMemoryReporter",
    known: ["log", () => {}],
    make: (o) => new ProfiledMemoryReporter(o),
  },
];

for (const c of cases) {
  Deno.test(`${c.name} refuses an unknown option key, naming it`, () => {
    const [key, value] = c.known;
    c.make({}); // no options: fine
    c.make({ [key]: value }); // a key it reads: fine
    const buffers = gpu.live.size;
    for (
      const typo of [
        `${key}s`,
        key.toLowerCase() === key ? key.toUpperCase() : key.toLowerCase(),
        "capacity",
      ]
    ) {
      if (typo === key) continue;
      let error: unknown;
      try {
        c.make({ [key]: value, [typo]: value });
      } catch (e) {
        error = e;
      }
      assert.ok(
        error instanceof InvalidArgumentError,
        `${c.name}({ ${typo} }): expected an InvalidArgumentError, got ${error}`,
      );
      assert.ok(
        error.message.includes(JSON.stringify(typo)) &&
          error.message.includes(key),
        `${c.name}: the message names the key and the accepted ones: ${error.message}`,
      );
      assert.ok(
        Array.isArray(error.limit) && error.limit.includes(key),
        `${c.name}: the limit lists the accepted keys`,
      );
      // (an undefined value is a key given too)
      assert.throws(() => c.make({ [typo]: undefined }), InvalidArgumentError);
    }
    assert.equal(gpu.live.size, buffers, `${c.name}: a refusal makes nothing`);
  });
}
