/**
 * {@linkcode junkFill}: what an allocator's strict mode writes into freed
 * memory, so that a stale view reads garbage it can recognise instead of
 * the next owner's data silently.
 *
 * @module
 */

import { hostBuffer, isHostMemory } from "./host_memory.ts";

/** The byte strict mode writes into freed memory (`0xDB`, "dead block"). */
export const JUNK_BYTE = 0xdb;

/**
 * Fills a range of memory with {@linkcode JUNK_BYTE} where the host can
 * write it: an `ArrayBuffer`, a `SharedArrayBuffer`, a `WebAssembly.Memory`,
 * or an object with a `bytes` `Uint8Array` (a backed mock segment). Device
 * memory the host cannot reach is left as it is.
 *
 * @param memory The segment's memory.
 * @param byteOffset First byte.
 * @param byteLength Bytes to fill.
 * @returns Whether the range was filled.
 *
 * @example
 * ```ts
 * import { JUNK_BYTE, junkFill } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const memory = new ArrayBuffer(8);
 * assert.equal(junkFill(memory, 4, 4), true);
 * assert.deepEqual([...new Uint8Array(memory)], [0, 0, 0, 0, JUNK_BYTE, JUNK_BYTE, JUNK_BYTE, JUNK_BYTE]);
 * ```
 */
export function junkFill(
  memory: unknown,
  byteOffset: number,
  byteLength: number,
): boolean {
  if (isHostMemory(memory)) {
    new Uint8Array(hostBuffer(memory), byteOffset, byteLength).fill(JUNK_BYTE);
    return true;
  }
  if (typeof memory === "object" && memory !== null && "bytes" in memory) {
    const bytes = (memory as { bytes: unknown }).bytes;
    if (bytes instanceof Uint8Array) {
      bytes.fill(JUNK_BYTE, byteOffset, byteOffset + byteLength);
      return true;
    }
  }
  return false;
}
