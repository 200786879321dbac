/**
 * The options half of the contract (see `_options.ts`) run against the
 * constructors of every CPU-side allocator and pool.
 *
 * @module
 */

import { MockSegmentSource } from "@allot/core";
import {
  CpuAllocator,
  CpuHeap,
  HostSegmentSource,
  SystemAllocator,
} from "@allot/cpu";
import { BuddyAllocator } from "@allot/buddy";
import { CachingAllocator, StepPlannedPool } from "@allot/caching";
import { WatermarkAllocator } from "@allot/watermark";
import { BufferPool } from "@allot/storage";
import { SharedHeap } from "@allot/threads";
import {
  GpuCachingAllocator,
  GpuPlannedAllocator,
  GpuSegmentSource,
  GpuWatermarkAllocator,
} from "@allot/webgpu";
import { type OptionCase, optionConformance } from "./_options.ts";
import { mockGpu } from "./_mock_gpu.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
const source = () => new MockSegmentSource({ capacityBytes: 64 * MiB });

const cases: OptionCase[] = [
  ...["alignment", "byteOffset", "byteLength", "maxByteLength"].map((
    key,
  ): OptionCase => ({
    name: `CpuHeap.${key}`,
    valid: key === "alignment" ? 64 : key === "byteOffset" ? 0 : 64 * KiB,
    make: (o) => new CpuHeap(new ArrayBuffer(64 * KiB), o).dispose(),
  })),
  {
    name: "CpuAllocator.maxByteLength",
    valid: 32 * MiB,
    accepts: [Infinity],
    make: (o) => void new CpuAllocator(o),
  },
  {
    name: "SystemAllocator.capacityBytes",
    valid: MiB,
    accepts: [Infinity],
    make: (o) => void new SystemAllocator(o),
  },
  ...["capacityBytes", "alignment", "maxSegmentByteLength"].map((
    key,
  ): OptionCase => ({
    name: `HostSegmentSource.${key}`,
    valid: key === "alignment" ? 64 : MiB,
    accepts: key === "capacityBytes" ? [Infinity] : [],
    make: (o) => void new HostSegmentSource(o),
  })),
  ...["capacityBytes", "alignment", "maxSegmentByteLength"].map((
    key,
  ): OptionCase => ({
    name: `MockSegmentSource.${key}`,
    valid: key === "alignment" ? 64 : MiB,
    accepts: key === "capacityBytes" ? [Infinity] : [],
    make: (o) => void new MockSegmentSource(o),
  })),
  ...["initialPoolByteLength", "maxPoolByteLength", "minBlockByteLength"].map(
    (key): OptionCase => ({
      name: `BuddyAllocator.${key}`,
      valid: key === "minBlockByteLength" ? 256 : MiB,
      make: (o) => void new BuddyAllocator(o),
    }),
  ),
  ...([
    ["minBlockByteLength", 512],
    ["smallRequestMaxByteLength", MiB],
    ["smallSegmentByteLength", 2 * MiB],
    ["largeSegmentByteLength", 20 * MiB],
    ["ownSegmentMinByteLength", 10 * MiB],
    ["largeRoundByteLength", 2 * MiB],
    ["segmentGrowthFraction", 1 / 128, [1.5]],
    ["minSegmentByteLength", 4 * KiB],
    ["releaseCachedAboveRatio", 1.05, [1.5, Infinity, 2 ** 53, 2 ** 64]],
    ["maxSplitByteLength", 32 * MiB, [Infinity]],
    ["maxNonSplitRoundingByteLength", 20 * MiB, [Infinity]],
    ["memoryFraction", 1],
    ["garbageCollectionThreshold", 0],
  ] as [string, number, unknown[]?][]).map((
    [key, valid, accepts],
  ): OptionCase => ({
    name: `CachingAllocator.${key}`,
    valid,
    accepts,
    make: (o) => void new CachingAllocator(source(), o),
  })),
  {
    name: "StepPlannedPool.maxHeldRatio",
    valid: 1.5,
    accepts: [1.5, 2 ** 53, 2 ** 64],
    make: (o) => new StepPlannedPool(source(), o).dispose(),
  },
  ...([
    ["recommendedMaxBytes", 32 * MiB, [Infinity]],
    ["highWatermarkRatio", 1.7, [1.5]],
    ["lowWatermarkRatio", 1, [1.5]],
    ["maxSmallByteLength", MiB],
    ["minLargeByteLength", 10 * MiB],
    ["smallHeapByteLength", 8 * MiB],
    ["largeHeapByteLength", 32 * MiB],
    ["xlargeHeapByteLength", 64 * MiB],
    ["largeRoundByteLength", 2 * MiB],
    ["maxSlackByteLength", MiB],
    ["maxScalarByteLength", 64],
    ["debugVerbosity", 0],
  ] as [string, number, unknown[]?][]).map((
    [key, valid, accepts],
  ): OptionCase => ({
    name: `WatermarkAllocator.${key}`,
    valid,
    accepts,
    make: (o) => void new WatermarkAllocator(source(), o),
  })),
  {
    name: "BufferPool.maxFreeBytes",
    valid: MiB,
    accepts: [Infinity],
    make: (o) => void new BufferPool(new SystemAllocator(), o),
  },
  ...["byteOffset", "byteLength", "lockTimeoutMs"].map((key): OptionCase => ({
    name: `SharedHeap.${key}`,
    valid: key === "byteOffset" ? 0 : key === "byteLength" ? MiB : 100,
    accepts: key === "lockTimeoutMs" ? [Infinity, 1.5, 2 ** 53, 2 ** 64] : [],
    make: (o) =>
      SharedHeap.create(new SharedArrayBuffer(2 * MiB), o as never).close(),
  })),
];

optionConformance("CPU allocators and pools", cases);

const gpu = () => mockGpu().device;
const gpuCases: OptionCase[] = [
  {
    name: "GpuSegmentSource.capacityBytes",
    valid: 64 * MiB,
    accepts: [Infinity],
    make: (o) => void new GpuSegmentSource(gpu(), o),
  },
  {
    name: "GpuSegmentSource.index",
    valid: 0,
    make: (o) => void new GpuSegmentSource(gpu(), o),
  },
  ...([
    ["largeSegmentByteLength", 20 * MiB],
    ["ownSegmentMinByteLength", 10 * MiB],
    ["minBlockByteLength", 512],
    ["memoryFraction", 1],
  ] as [string, number][]).map(([key, valid]): OptionCase => ({
    name: `GpuCachingAllocator.${key}`,
    valid,
    make: (o) => void new GpuCachingAllocator(gpu(), o),
  })),
  ...([
    ["largeHeapByteLength", 32 * MiB],
    ["xlargeHeapByteLength", 32 * MiB],
    ["highWatermarkRatio", 1.7, [1.5]],
  ] as [string, number, unknown[]?][]).map((
    [key, valid, accepts],
  ): OptionCase => ({
    name: `GpuWatermarkAllocator.${key}`,
    valid,
    accepts,
    make: (o) => void new GpuWatermarkAllocator(gpu(), o),
  })),
  {
    name: "GpuPlannedAllocator.maxHeldRatio",
    valid: 1.5,
    accepts: [1.5, 2 ** 53, 2 ** 64],
    make: (o) => void new GpuPlannedAllocator(gpu(), o),
  },
];

optionConformance("GPU allocators (mock device)", gpuCases);

/** A boolean option: refuses anything but `true`/`false` (and undefined). */
function flag(
  name: string,
  make: (o: Record<string, unknown>) => { close?(): void } | void,
): OptionCase {
  return { name, valid: false, make, hostile: FLAG_HOSTILE };
}

const FLAG_HOSTILE: readonly { label: string; value: unknown }[] = [
  { label: "null", value: null },
  { label: "1", value: 1 },
  { label: "0", value: 0 },
  { label: '"yes"', value: "yes" },
  { label: '"false"', value: "false" },
  { label: "{}", value: {} },
  { label: "new Boolean(false)", value: new Boolean(false) },
];

const flagCases: OptionCase[] = [
  ...["mobile", "shared", "strict"].map((k) =>
    flag(
      `CpuHeap.${k}`,
      (o) => new CpuHeap(64 * KiB, o).dispose(),
    )
  ),
  ...["zeroFill", "junkFill", "strict"].map((k) =>
    flag(`CpuAllocator.${k}`, (o) => void new CpuAllocator(o))
  ),
  ...["shared", "junkFill", "strict"].map((k) =>
    flag(`SystemAllocator.${k}`, (o) => void new SystemAllocator(o))
  ),
  flag("HostSegmentSource.shared", (o) => void new HostSegmentSource(o)),
  flag("BuddyAllocator.strict", (o) => void new BuddyAllocator(o)),
  ...["expandableSegments", "strict"].map((k) =>
    flag(
      `CachingAllocator.${k}`,
      (o) => void new CachingAllocator(source(), o),
    )
  ),
  flag(
    "StepPlannedPool.strict",
    (o) => new StepPlannedPool(source(), o).dispose(),
  ),
  ...["unifiedMemory", "strict"].map((k) =>
    flag(
      `WatermarkAllocator.${k}`,
      (o) => void new WatermarkAllocator(source(), o),
    )
  ),
  flag(
    "BufferPool.strict",
    (o) => void new BufferPool(new SystemAllocator(), o),
  ),
  flag(
    "SharedHeap.strict",
    (o) => SharedHeap.create(new SharedArrayBuffer(MiB), o as never).close(),
  ),
];

optionConformance("boolean options", flagCases);

optionConformance("GPU boolean options (mock device)", [
  flag(
    "GpuCachingAllocator.strict",
    (o) => void new GpuCachingAllocator(gpu(), o),
  ),
  flag(
    "GpuCachingAllocator.expandableSegments",
    (o) => void new GpuCachingAllocator(gpu(), o),
  ),
  flag(
    "GpuWatermarkAllocator.strict",
    (o) => void new GpuWatermarkAllocator(gpu(), o),
  ),
  flag(
    "GpuPlannedAllocator.strict",
    (o) => void new GpuPlannedAllocator(gpu(), o),
  ),
]);
