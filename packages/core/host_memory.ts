/**
 * Host memories: the linear memories JavaScript code can read directly.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { describeValue } from "./validate.ts";

/**
 * A `WebAssembly.Memory`, as allot's public types name it: the members allot
 * reads. Written out so that the types compile without the DOM lib (Node's
 * own type declarations for Node 20, `@types/node@20`, have no `WebAssembly`
 * namespace); at run time only a real `WebAssembly.Memory` is accepted.
 */
export interface WasmMemory {
  /** The current buffer; replaced when the memory grows. */
  readonly buffer: ArrayBuffer | SharedArrayBuffer;
  /**
   * Grows the memory by `delta` 64 KiB pages.
   *
   * @param delta Pages to add.
   * @returns The length in pages before growing.
   */
  grow(delta: number): number;
}

/**
 * A linear memory the host can read: an `ArrayBuffer` (plain or resizable), a
 * `SharedArrayBuffer` (plain or growable), or a `WebAssembly.Memory`
 * ({@linkcode WasmMemory}), whose `buffer` is replaced when it grows (so keep
 * the memory, not its buffer).
 */
export type HostMemory = ArrayBuffer | SharedArrayBuffer | WasmMemory;

/**
 * Returns whether `value` is a {@linkcode HostMemory}.
 *
 * @param value Any value.
 * @returns `true` for `ArrayBuffer`, `SharedArrayBuffer` and `WebAssembly.Memory`.
 *
 * @example
 * ```ts
 * import { isHostMemory } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.ok(isHostMemory(new ArrayBuffer(8)));
 * assert.ok(!isHostMemory(new Uint8Array(8)));
 * ```
 */
export function isHostMemory(value: unknown): value is HostMemory {
  try {
    return value instanceof ArrayBuffer ||
      (typeof SharedArrayBuffer !== "undefined" &&
        value instanceof SharedArrayBuffer) ||
      (typeof WebAssembly !== "undefined" &&
        value instanceof WebAssembly.Memory);
  } catch {
    return false; // a proxy whose getPrototypeOf traps is no host memory
  }
}

/**
 * The current buffer of a host memory: the memory itself, or the `buffer` of a
 * `WebAssembly.Memory`. Call it again after the memory grows.
 *
 * @param memory A host memory.
 * @returns Its current `ArrayBuffer` or `SharedArrayBuffer`.
 * @throws {InvalidArgumentError} When `memory` is none of them (a look-alike
 * `WebAssembly.Memory` included).
 *
 * @example
 * ```ts
 * import { hostBuffer } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const memory = new WebAssembly.Memory({ initial: 1 });
 * assert.equal(hostBuffer(memory).byteLength, 65536);
 * ```
 */
export function hostBuffer(
  memory: HostMemory,
): ArrayBuffer | SharedArrayBuffer {
  let plain = false;
  try {
    plain = memory instanceof ArrayBuffer ||
      (typeof SharedArrayBuffer !== "undefined" &&
        memory instanceof SharedArrayBuffer);
  } catch {
    // a proxy whose getPrototypeOf traps: refused below
  }
  return plain
    ? memory as ArrayBuffer | SharedArrayBuffer
    : _memoryBuffer(memory);
}

function _memoryBuffer(memory: unknown): ArrayBuffer | SharedArrayBuffer {
  try {
    if (
      typeof WebAssembly !== "undefined" &&
      memory instanceof WebAssembly.Memory
    ) return memory.buffer;
  } catch {
    // Object.create(WebAssembly.Memory.prototype), or a proxy that traps:
    // not a memory
  }
  throw new InvalidArgumentError(
    `Cannot read a host memory's buffer: must be an ArrayBuffer, a SharedArrayBuffer or a WebAssembly.Memory, received ${
      describeValue(memory)
    }`,
    { name: "memory", value: memory, limit: "HostMemory" },
  );
}
