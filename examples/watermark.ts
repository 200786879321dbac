/**
 * `@allot/watermark` at work: an MPS-style allocator on a 256 MiB mock
 * device with host-visible memory. It shows heaps by size class, a shared
 * buffer written through its host view, a scalar constant, a buffer freed
 * while the device still uses it, garbage collection under memory pressure,
 * a host that frees memory when an allocation fails, and the hard limit.
 *
 * Run: `deno run -A examples/watermark.ts`
 *
 * @module
 */

import { ManualStream, MockSegmentSource } from "@allot/core";
import {
  WatermarkAllocator,
  WatermarkOutOfMemoryError,
} from "@allot/watermark";

const MiB = 1024 * 1024;
const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

const device = new MockSegmentSource({
  capacityBytes: 256 * MiB,
  backed: true,
});
const allocator = new WatermarkAllocator(device, {
  highWatermarkRatio: 1.0, // hard limit: 256 MiB of heaps
  lowWatermarkRatio: 0.5, // memory pressure from 128 MiB
});
const counts: Record<string, number> = {};
allocator.addCallback((event) => {
  const key = event.reason ? `${event.type} (${event.reason})` : event.type;
  counts[key] = (counts[key] ?? 0) + 1;
});

console.log("1. Heaps by size class");
const small = allocator.allocateBuffer(4096); // 8 MiB heap
const medium = allocator.allocateBuffer(3 * MiB); // 32 MiB heap
console.log(
  `   4 KiB -> heap #${small.heapId}, 3 MiB -> heap #${medium.heapId}; ` +
    `heaps hold ${mib(allocator.totalAllocatedBytes)}`,
);

console.log("2. A shared buffer and a scalar constant");
const shared = allocator.allocateBuffer(16, { pool: "shared" });
shared.sharedView()!.set([1, 2, 3, 4]);
shared.shape = [4, 4];
const scalar = allocator.allocScalarBufferWithValue(Float32Array.of(0.5));
console.log(
  `   shared #${shared.id} shape [${shared.shape}] starts with ` +
    `[${shared.sharedView()!.subarray(0, 4)}]; scalar pool: ${scalar.pool}`,
);

console.log("3. Freed while the device still reads it");
const stream = new ManualStream();
allocator.recordEvents([medium], stream);
medium.release();
const other = allocator.allocateBuffer(3 * MiB);
console.log(
  `   pending free: ${mib(allocator.stats().pendingFreeBytes)}; ` +
    `a new 3 MiB buffer is ${
      other.id === medium.id ? "the same" : "another"
    } buffer`,
);
stream.completeAll();
allocator.freeInactiveBuffers();
console.log(
  `   after the work completed: ${mib(allocator.stats().cachedBytes)} cached`,
);

console.log("4. Memory pressure");
const big = [60, 50, 40].map((n) => allocator.allocateBuffer(n * MiB));
for (const b of big) b.release();
console.log(
  `   driver ${mib(allocator.driverAllocatedBytes)} >= low limit ` +
    `${mib(allocator.lowWatermarkLimit)}: under pressure`,
);
const next = allocator.allocateBuffer(100 * MiB);
console.log(
  `   a 100 MiB request ran ${allocator.stats().numGarbageCollections} ` +
    `GC pass(es); driver now ${mib(allocator.driverAllocatedBytes)}`,
);

console.log("5. The host frees memory when an allocation fails");
const hostCache = [allocator.allocateBuffer(100 * MiB)];
const removeHook = allocator.addCallback((event) => {
  if (event.type === "allocation-failed") hostCache.pop()?.release();
});
const again = allocator.allocateBuffer(100 * MiB);
removeHook();
console.log(`   got buffer #${again.id} after the host released its cache`);

console.log("6. The hard limit");
try {
  allocator.allocateBuffer(200 * MiB);
} catch (error) {
  if (!(error instanceof WatermarkOutOfMemoryError)) throw error;
  console.log(`   ${error.message}`);
}

for (const b of [small, shared, scalar, other, next, again]) b.release();
allocator.emptyCache();
const stats = allocator.stats();
console.log("7. Stats");
console.log(
  `   peak heaps ${mib(stats.reservedBytes.peak)}, peak in use ` +
    `${mib(stats.allocatedBytes.peak)}, new ${stats.numAllocations}, ` +
    `recycled ${stats.numRecycles}, released ${stats.numReleases}`,
);
console.log(`   events: ${JSON.stringify(counts)}`);
console.log(`   device holds ${device.reservedBytes} bytes after emptyCache()`);
if (device.reservedBytes !== 0) throw new Error("memory left on the device");
