/**
 * The {@linkcode Allocator} interface every allot allocator implements, and
 * {@linkcode AllocatorBase}, which derives the raw and copy operations from
 * `allocate`.
 *
 * @module
 */

import { DataPtr } from "./data_ptr.ts";
import type { Device } from "./device.ts";
import {
  InvalidArgumentError,
  OutOfMemoryError,
  UnsupportedOperationError,
  UseAfterFreeError,
} from "./errors.ts";
import { hostBuffer, isHostMemory } from "./host_memory.ts";
import type { Deleter } from "./unique_void_ptr.ts";
import { describeValue } from "./validate.ts";

/**
 * Hands out memory on one device as owning {@linkcode DataPtr}s, like
 * PyTorch's `c10::Allocator`.
 *
 * @typeParam M Type of the memory a pointer lives in.
 * @typeParam C Type of the deleter context.
 */
export interface Allocator<M = unknown, C = unknown> {
  /** The device this allocator serves. */
  readonly device: Device;
  /**
   * Allocates `byteLength` bytes.
   *
   * @param byteLength Number of bytes; 0 gives a zero-byte pointer.
   * @returns An owning pointer; release it to free the memory.
   */
  allocate(byteLength: number): DataPtr<M, C>;
  /**
   * The deleter that frees a context given by `rawAllocate`, or `undefined`
   * when this allocator has no raw interface.
   *
   * @returns The raw deleter, if any.
   */
  rawDeleter(): Deleter<C> | undefined;
  /**
   * Allocates and gives up ownership: returns the context, which the caller
   * frees with `rawDeallocate`.
   *
   * @param byteLength Number of bytes.
   * @returns The context of the allocation.
   */
  rawAllocate(byteLength: number): C;
  /**
   * Frees a context given by `rawAllocate`.
   *
   * @param context The context.
   */
  rawDeallocate(context: C): void;
  /**
   * Copies `byteLength` bytes from `src` to `dest`.
   *
   * @param dest Destination pointer.
   * @param src Source pointer.
   * @param byteLength Number of bytes; at most both pointers' lengths.
   */
  copyData(dest: DataPtr<M, C>, src: DataPtr<M, C>, byteLength: number): void;
  /**
   * Allocates a new pointer of the same length and copies `src` into it.
   *
   * @param src The pointer to copy.
   * @returns A new owning pointer.
   */
  clone(src: DataPtr<M, C>): DataPtr<M, C>;
}

/**
 * Implements the derived parts of {@linkcode Allocator}: `rawAllocate`,
 * `rawDeallocate` and `clone` on top of `allocate` and `rawDeleter`, and
 * `copyData` for host memories. Subclasses implement `device` and `allocate`,
 * and override `rawDeleter` to enable the raw interface.
 *
 * @typeParam M Type of the memory a pointer lives in.
 * @typeParam C Type of the deleter context.
 *
 * @example A minimal allocator: one ArrayBuffer per allocation
 * ```ts
 * import { AllocatorBase, DataPtr, Device } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * class Simple extends AllocatorBase<ArrayBuffer, ArrayBuffer> {
 *   readonly device: Device = Device.cpu();
 *   allocate(byteLength: number): DataPtr<ArrayBuffer, ArrayBuffer> {
 *     const memory = new ArrayBuffer(byteLength);
 *     return new DataPtr(memory, 0, byteLength, this.device, { context: memory, deleter: () => {} });
 *   }
 * }
 * const allocator = new Simple();
 * using a = allocator.allocate(4);
 * new Uint8Array(a.memory).set([1, 2, 3, 4]);
 * using b = allocator.clone(a);
 * assert.deepEqual([...new Uint8Array(b.memory)], [1, 2, 3, 4]);
 * ```
 */
export abstract class AllocatorBase<M = unknown, C = unknown>
  implements Allocator<M, C> {
  /** The device this allocator serves. */
  abstract readonly device: Device;

  /**
   * Allocates `byteLength` bytes.
   *
   * @param byteLength Number of bytes.
   * @returns An owning pointer.
   */
  abstract allocate(byteLength: number): DataPtr<M, C>;

  /**
   * The raw deleter; `undefined` unless a subclass enables the raw interface.
   *
   * @returns `undefined` by default.
   */
  rawDeleter(): Deleter<C> | undefined {
    return undefined;
  }

  /**
   * Allocates and returns the context, giving up ownership.
   *
   * @param byteLength Number of bytes.
   * @returns The context.
   * @throws {UnsupportedOperationError} When there is no raw deleter.
   */
  rawAllocate(byteLength: number): C {
    this.#requireRawDeleter("rawAllocate");
    const ptr = this.allocate(byteLength);
    const context = ptr.releaseContext();
    if (context === null) {
      throw new UnsupportedOperationError(
        `Cannot rawAllocate ${byteLength} bytes: the allocation owns no context`,
      );
    }
    return context;
  }

  /**
   * Frees a context from `rawAllocate`.
   *
   * @param context The context.
   * @throws {UnsupportedOperationError} When there is no raw deleter.
   */
  rawDeallocate(context: C): void {
    this.#requireRawDeleter("rawDeallocate")(context);
  }

  /**
   * Copies bytes between two pointers in host memory. Subclasses for other
   * memories override this.
   *
   * @param dest Destination pointer.
   * @param src Source pointer.
   * @param byteLength Number of bytes.
   * @throws {InvalidArgumentError} When `byteLength` exceeds either pointer.
   * @throws {UseAfterFreeError} When either pointer was released.
   * @throws {UnsupportedOperationError} When a memory is not host memory.
   */
  copyData(dest: DataPtr<M, C>, src: DataPtr<M, C>, byteLength: number): void {
    checkCopyArguments(dest, src, byteLength);
    if (byteLength === 0) return;
    const d = dest.memory, s = src.memory;
    if (!isHostMemory(d) || !isHostMemory(s)) {
      throw new UnsupportedOperationError(
        `Cannot copy ${byteLength} bytes: copyData of ${this.constructor.name} handles host memory only`,
      );
    }
    const db = hostBuffer(d), sb = hostBuffer(s);
    // a resizable buffer may have shrunk below the place since it was made
    for (
      const [name, buffer, ptr] of [["dest", db, dest], [
        "src",
        sb,
        src,
      ]] as const
    ) {
      if (ptr.byteOffset + byteLength > buffer.byteLength) {
        throw new InvalidArgumentError(
          `Cannot copy ${byteLength} bytes: the ${name} memory now holds ${buffer.byteLength} bytes, the place ends at ${
            ptr.byteOffset + byteLength
          }`,
          {
            name,
            value: ptr.byteOffset + byteLength,
            limit: buffer.byteLength,
          },
        );
      }
    }
    new Uint8Array(db, dest.byteOffset, byteLength).set(
      new Uint8Array(sb, src.byteOffset, byteLength),
    );
  }

  /**
   * Allocates a pointer of the same length and copies `src` into it.
   *
   * @param src The pointer to copy.
   * @returns A new owning pointer.
   */
  clone(src: DataPtr<M, C>): DataPtr<M, C> {
    // Refused before allocating: a refused call changes nothing.
    _requireDataPtr(src, "src", "clone");
    if (src.released) {
      throw new UseAfterFreeError(
        `Cannot clone ${src}: the pointer was released`,
      );
    }
    const dest = this.allocate(src.byteLength);
    try {
      this.copyData(dest, src, src.byteLength);
    } catch (error) {
      dest.release();
      throw error;
    }
    return dest;
  }

  /**
   * Allocates like {@linkcode AllocatorBase.allocate}, but returns
   * `undefined` where it would throw an out-of-memory error (an
   * `OutOfMemoryError` or a subclass). A bad request still throws.
   *
   * @param byteLength Number of bytes.
   * @returns An owning pointer, or `undefined` when the memory is full.
   * @throws {InvalidArgumentError} For a bad request, as `allocate`.
   */
  tryAllocate(byteLength: number): DataPtr<M, C> | undefined {
    try {
      return this.allocate(byteLength);
    } catch (error) {
      if (error instanceof OutOfMemoryError) return undefined;
      throw error;
    }
  }

  #requireRawDeleter(what: string): Deleter<C> {
    const deleter = this.rawDeleter();
    if (deleter === undefined) {
      throw new UnsupportedOperationError(
        `Cannot ${what}: ${this.constructor.name} has no raw deleter`,
      );
    }
    return deleter;
  }
}

/**
 * Checks the arguments of {@linkcode Allocator.copyData}, for allocators that
 * copy their own way: both pointers real `DataPtr`s (a brand check),
 * `byteLength` an integer in [0, both lengths], neither pointer released.
 * A refused copy throws before anything is read or written.
 *
 * @param dest The destination pointer.
 * @param src The source pointer.
 * @param byteLength Bytes to copy.
 * @throws {InvalidArgumentError} For a pointer that is not a `DataPtr`, or a
 * length that is not an integer in range; the message names the value and
 * the limit.
 * @throws {UseAfterFreeError} When either pointer was released.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkCopyArguments, DataPtr, Device, InvalidArgumentError } from "@allot/core";
 *
 * const memory = new ArrayBuffer(8);
 * const a = new DataPtr(memory, 0, 8, Device.cpu());
 * const b = new DataPtr(memory, 0, 4, Device.cpu());
 * checkCopyArguments(a, b, 4);
 * assert.throws(() => checkCopyArguments(a, b, 5), InvalidArgumentError);
 * assert.throws(() => checkCopyArguments(a, {} as DataPtr, 0), InvalidArgumentError);
 * ```
 */
export function checkCopyArguments(
  dest: DataPtr<unknown, unknown>,
  src: DataPtr<unknown, unknown>,
  byteLength: number,
): void {
  _requireDataPtr(dest, "dest", "copy");
  _requireDataPtr(src, "src", "copy");
  const limit = Math.min(dest.byteLength, src.byteLength);
  if (
    !Number.isSafeInteger(byteLength) || byteLength < 0 || byteLength > limit
  ) {
    throw new InvalidArgumentError(
      `Cannot copy ${
        describeValue(byteLength)
      } bytes: must be an integer in [0, ${limit}] (dest ${dest.byteLength}, src ${src.byteLength})`,
      { name: "byteLength", value: byteLength, limit },
    );
  }
  if (dest.released || src.released) {
    throw new UseAfterFreeError(
      `Cannot copy ${byteLength} bytes: the ${
        dest.released ? "destination" : "source"
      } pointer was released`,
    );
  }
}

function _requireDataPtr(value: unknown, name: string, what: string): void {
  // a brand check: a look-alike made with Object.create(DataPtr.prototype)
  // passes instanceof but has no private state (its getters throw TypeError)
  if (!DataPtr.isDataPtr(value)) {
    throw new InvalidArgumentError(
      `Cannot ${what}: ${name} must be a DataPtr, received ${
        describeValue(value)
      }`,
      { name, value, limit: "DataPtr" },
    );
  }
}
