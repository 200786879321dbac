/**
 * `@allot/buddy`: a buddy allocator with initial and maximum pool sizes over a
 * backing allocator, and Paddle's place-based `alloc`/`free`/`used` API.
 *
 * @example One buddy allocator per place
 * ```ts
 * import { PlaceAllocator } from "@allot/buddy";
 * import assert from "node:assert/strict";
 *
 * const memory = new PlaceAllocator({ initialPoolByteLength: 1 << 20 });
 * const p = memory.alloc("cpu", 4 * 1024);
 * assert.equal(p.byteOffset % 64, 0);
 * assert.equal(memory.used("cpu"), 4 * 1024);
 * memory.free("cpu", p);
 * assert.equal(memory.used("cpu"), 0);
 * ```
 *
 * @module
 */

export * from "./buddy_allocator.ts";
export * from "./place_allocator.ts";
