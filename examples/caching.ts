/**
 * `@allot/caching` at work on host memory: a caching allocator over
 * `@allot/cpu`'s `HostSegmentSource` (one ArrayBuffer per segment). It
 * allocates and reuses blocks without new segments, orders reuse behind a
 * second stream's fence, explains an out-of-memory error, and prints the
 * stats summary and a snapshot.
 *
 * Run: `deno run -A examples/caching.ts`
 *
 * @module
 */

import { CachingAllocator, CachingOutOfMemoryError } from "@allot/caching";
import { ManualStream } from "@allot/core";
import { HostSegmentSource } from "@allot/cpu";

const MiB = 2 ** 20;
const device = new HostSegmentSource({ capacityBytes: 64 * MiB });
const allocator = new CachingAllocator(device, { recordHistory: true });

// 1. Allocate, write through a view, free, and reuse from the cache.
for (let step = 0; step < 100; step++) {
  using block = allocator.allocate(256 * 1024);
  new Float32Array(block.memory, block.byteOffset, 64 * 1024).fill(step);
}
console.log(
  `100 allocations of 256 KiB used ${device.liveSegmentCount} segment(s)`,
);

// 2. A block read by a copy stream returns to the pool only after its fence.
const copy = new ManualStream();
const a = allocator.allocate(4096);
const address = a.address;
a.recordStream(copy);
a.release();
using b = allocator.allocate(4096);
console.log(
  `while the copy runs, a new block gets another place: ${
    b.address !== address
  }`,
);
copy.completeAll();
using c = allocator.allocate(4096);
console.log(
  `after the copy's fence, the place is reused: ${c.address === address}`,
);

// 3. Out of memory: the error says what was asked and what is held.
try {
  allocator.allocate(100 * MiB);
} catch (error) {
  if (!(error instanceof CachingOutOfMemoryError)) throw error;
  console.log(`\n${error.message}\n`);
}

// 4. What the allocator holds.
console.log(allocator.memorySummary({ abbreviated: true }));
const snapshot = allocator.snapshot();
for (const segment of snapshot.segments) {
  console.log(
    `segment ${segment.id} (${segment.pool}, ${segment.byteLength} B): ${
      segment.blocks.map((block) => `${block.state}:${block.byteLength}`).join(
        " ",
      )
    }`,
  );
}
console.log(`history: ${snapshot.history.length} events`);
allocator.validate();
