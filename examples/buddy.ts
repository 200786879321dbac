/**
 * `@allot/buddy`: Paddle's place-based memory API over buddy allocators.
 *
 * Run: `deno run -A examples/buddy.ts`
 *
 * @module
 */

import { BuddyAllocator, PlaceAllocator } from "@allot/buddy";

// memory::Alloc(place, size), memory::Used(place), memory::Free(place, p)
const memory = new PlaceAllocator({
  initialPoolByteLength: 1 << 20,
  maxPoolByteLength: 64 << 20,
});
const p = memory.alloc("cpu", 4 * 1024);
const q = memory.alloc("cpu:1", 100);
console.log(
  `cpu:0 uses ${memory.used("cpu")} bytes, cpu:1 uses ${
    memory.used("cpu:1")
  } bytes (one buddy allocator per place: ${memory.places().join(", ")})`,
);
memory.free("cpu", p);
memory.free("cpu:1", q);
console.log(`after free: cpu:0 uses ${memory.used("cpu")} bytes`);

// The buddy allocator itself: power-of-two blocks, split and merged.
const buddy = new BuddyAllocator({
  initialPoolByteLength: 1 << 16,
  maxPoolByteLength: 1 << 18,
});
const blocks = [1000, 3000, 20000, 40000].map((n) => buddy.alloc(n));
for (const address of blocks) {
  console.log(
    `block of ${buddy.byteLengthOf(address)} bytes at byte offset ${
      buddy.byteOffsetOf(address)
    } of pool ${Math.floor(address / buddy.poolByteLength)}`,
  );
}
console.log(
  `pools held: ${buddy.poolCount}, used: ${buddy.allocatedBytes} bytes`,
);
for (const address of blocks) buddy.free(address);
console.log(
  `after free: largest free block ${buddy.largestFreeBytes} bytes; trim() gave back ${buddy.trim()} bytes`,
);
