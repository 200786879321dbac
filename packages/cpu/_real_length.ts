/**
 * The real byte length and buffer of a host memory, read through the
 * built-in getters rather than the object's own properties: an `ArrayBuffer`
 * or `SharedArrayBuffer` subclass may override `byteLength`, and a
 * `WebAssembly.Memory` subclass `buffer`, to claim bytes the memory does not
 * have. The heap manages and hands out offsets up to the length it reads, so
 * it must read the length the engine enforces.
 *
 * @module
 */

import {
  describeValue,
  type HostMemory,
  InvalidArgumentError,
} from "@allot/core";

function intrinsicGetter(
  proto: object | undefined,
  key: string,
): ((this: unknown) => unknown) | undefined {
  if (proto === undefined) return undefined;
  return Object.getOwnPropertyDescriptor(proto, key)?.get as
    | ((this: unknown) => unknown)
    | undefined;
}

const arrayBufferLength = intrinsicGetter(ArrayBuffer.prototype, "byteLength");
const sharedBufferLength = intrinsicGetter(
  typeof SharedArrayBuffer !== "undefined"
    ? SharedArrayBuffer.prototype
    : undefined,
  "byteLength",
);
const memoryBuffer = intrinsicGetter(
  typeof WebAssembly !== "undefined" ? WebAssembly.Memory.prototype : undefined,
  "buffer",
);

function refuse(value: unknown): never {
  throw new InvalidArgumentError(
    `Invalid memory: must be an ArrayBuffer, SharedArrayBuffer or WebAssembly.Memory, received ${
      describeValue(value)
    }`,
    { name: "memory", value, limit: "HostMemory" },
  );
}

/**
 * The byte length of an `ArrayBuffer` or `SharedArrayBuffer` as the engine
 * knows it (0 once detached), whatever its own `byteLength` says.
 *
 * @param buffer A buffer.
 * @returns Its real byte length.
 * @throws {InvalidArgumentError} When `buffer` is neither.
 */
export function _realByteLength(
  buffer: ArrayBuffer | SharedArrayBuffer,
): number {
  try {
    return arrayBufferLength!.call(buffer) as number;
  } catch {
    // not an ArrayBuffer: a SharedArrayBuffer, or a look-alike
  }
  if (sharedBufferLength !== undefined) {
    try {
      return sharedBufferLength.call(buffer) as number;
    } catch {
      // a look-alike
    }
  }
  return refuse(buffer);
}

/**
 * The current buffer of a host memory: the memory itself, or the buffer the
 * engine holds for a `WebAssembly.Memory` (not what a subclass's `buffer`
 * getter returns).
 *
 * @param memory A host memory.
 * @returns Its buffer.
 * @throws {InvalidArgumentError} When `memory` is none of them.
 */
export function _realBuffer(
  memory: HostMemory,
): ArrayBuffer | SharedArrayBuffer {
  if (
    memory instanceof ArrayBuffer ||
    (typeof SharedArrayBuffer !== "undefined" &&
      memory instanceof SharedArrayBuffer)
  ) {
    _realByteLength(memory); // refuses a look-alike
    return memory;
  }
  if (memoryBuffer !== undefined) {
    try {
      return memoryBuffer.call(memory) as ArrayBuffer | SharedArrayBuffer;
    } catch {
      // a look-alike WebAssembly.Memory
    }
  }
  return refuse(memory);
}

/**
 * The engine's current buffer of a `WebAssembly.Memory` that
 * {@linkcode _realBuffer} accepted (no checks: a view's hot path).
 *
 * @param memory A real `WebAssembly.Memory`, subclass or not.
 * @returns Its buffer.
 */
export function _wasmBuffer(
  memory: WebAssembly.Memory,
): ArrayBuffer | SharedArrayBuffer {
  return memoryBuffer!.call(memory) as ArrayBuffer | SharedArrayBuffer;
}
