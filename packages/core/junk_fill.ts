/**
 * {@linkcode junkFill}: what an allocator's strict mode writes into freed
 * memory, so that a stale view reads garbage it can recognise instead of
 * the next owner's data silently.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { hostBuffer, isHostMemory } from "./host_memory.ts";
import { MAX_BYTE_LENGTH, validateByteLength } from "./validate.ts";

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
 * @throws {InvalidArgumentError} When `byteOffset` or `byteLength` is not a
 * non-negative safe integer, or the range ends past a host memory's bytes;
 * nothing is written.
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
  validateByteLength(byteOffset, MAX_BYTE_LENGTH, "byteOffset");
  validateByteLength(byteLength, MAX_BYTE_LENGTH - byteOffset, "byteLength");
  if (isHostMemory(memory)) {
    const buffer = hostBuffer(memory);
    let limit: number;
    try {
      limit = buffer.byteLength;
    } catch {
      throw new InvalidArgumentError(
        "Cannot junk-fill: memory is an ArrayBuffer look-alike (its byteLength cannot be read)",
        { name: "memory", value: memory, limit: "HostMemory" },
      );
    }
    checkEnd(byteOffset, byteLength, limit);
    new Uint8Array(buffer, byteOffset, byteLength).fill(JUNK_BYTE);
    return true;
  }
  let bytes: unknown;
  try {
    if (typeof memory === "object" && memory !== null && "bytes" in memory) {
      bytes = (memory as { bytes: unknown }).bytes;
    }
  } catch {
    return false; // a memory that traps when read: the host cannot reach it
  }
  if (bytes instanceof Uint8Array) {
    checkEnd(byteOffset, byteLength, bytes.length);
    bytes.fill(JUNK_BYTE, byteOffset, byteOffset + byteLength);
    return true;
  }
  return false;
}

function checkEnd(byteOffset: number, byteLength: number, limit: number): void {
  if (byteOffset + byteLength > limit) {
    throw new InvalidArgumentError(
      `Cannot junk-fill ${byteLength} bytes at byteOffset ${byteOffset}: the memory holds ${limit} bytes`,
      {
        name: "byteLength",
        value: byteLength,
        limit: limit - Math.min(limit, byteOffset),
      },
    );
  }
}
