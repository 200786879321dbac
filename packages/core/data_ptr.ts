/**
 * {@linkcode DataPtr}: an owning pointer to a place in a memory, with the
 * device that owns that memory.
 *
 * @module
 */

import type { Device } from "./device.ts";
import { UseAfterFreeError } from "./errors.ts";
import { type Deleter, UniqueVoidPtr } from "./unique_void_ptr.ts";

/** Ownership part of a {@linkcode DataPtr}: what to free and how. */
export interface DataPtrOwnership<C> {
  /** What the deleter frees; `null` (the default) owns nothing. */
  context?: C | null;
  /** Called once with the context when the pointer is cleared. */
  deleter?: Deleter<C> | null;
}

/**
 * A place in a memory: the memory itself (a heap's `ArrayBuffer`,
 * `SharedArrayBuffer` or `WebAssembly.Memory`, or a `GPUBuffer`), a byte
 * offset and a byte length, plus the {@linkcode Device} that owns the memory.
 * It owns the allocation like a {@linkcode UniqueVoidPtr}: the deleter runs
 * exactly once, on `clear()`, `release()` or `using` scope exit. Reading the
 * place after that throws {@linkcode UseAfterFreeError}.
 *
 * Zero-byte pointers are ordinary values: they carry a device and usually own
 * nothing.
 *
 * @typeParam M Type of the memory (for example `ArrayBuffer` or `GPUBuffer`).
 * @typeParam C Type of the deleter's context.
 *
 * @example Own eight bytes of an ArrayBuffer
 * ```ts
 * import { DataPtr, Device } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const memory = new ArrayBuffer(64);
 * let freed = false;
 * {
 *   using ptr = new DataPtr(memory, 16, 8, Device.cpu(), {
 *     context: 16,
 *     deleter: () => { freed = true; },
 *   });
 *   new Uint8Array(ptr.memory, ptr.byteOffset, ptr.byteLength).fill(1);
 * }
 * assert.ok(freed);
 * assert.equal(new Uint8Array(memory)[16], 1);
 * ```
 */
export class DataPtr<M = unknown, C = unknown> extends UniqueVoidPtr<M, C> {
  /** The device that owns the memory. */
  readonly device: Device;
  #byteOffset: number;
  #byteLength: number;
  #released = false;

  /**
   * Creates a data pointer.
   *
   * @param memory The memory the place is in.
   * @param byteOffset Byte offset of the place in the memory.
   * @param byteLength Byte length of the place.
   * @param device Device that owns the memory.
   * @param ownership Context and deleter; omit for a non-owning pointer.
   */
  constructor(
    memory: M,
    byteOffset: number,
    byteLength: number,
    device: Device,
    ownership: DataPtrOwnership<C> = {},
  ) {
    super(memory, ownership.context ?? null, ownership.deleter ?? null);
    this.device = device;
    this.#byteOffset = byteOffset;
    this.#byteLength = byteLength;
  }

  /**
   * The memory the place is in.
   *
   * @throws {UseAfterFreeError} After the pointer was cleared or released.
   */
  get memory(): M {
    if (this.#released) this.#throwReleased("memory");
    return this.get() as M;
  }

  /**
   * Byte offset of the place in its memory.
   *
   * @throws {UseAfterFreeError} After the pointer was cleared or released.
   */
  get byteOffset(): number {
    if (this.#released) this.#throwReleased("byteOffset");
    return this.#byteOffset;
  }

  /** Byte length of the place; still readable after release. */
  get byteLength(): number {
    return this.#byteLength;
  }

  /** Whether the pointer was cleared or gave up its context. */
  get released(): boolean {
    return this.#released;
  }

  /** Runs the deleter once (if a context is owned) and invalidates the place. */
  override clear(): void {
    this.#released = true;
    super.clear();
  }

  /** Same as {@linkcode DataPtr.clear}: frees the place. */
  release(): void {
    this.clear();
  }

  /**
   * Gives up ownership and invalidates this pointer; returns the context.
   *
   * @returns The context that was owned, or `null`.
   */
  override releaseContext(): C | null {
    this.#released = true;
    return super.releaseContext();
  }

  /**
   * Short description such as `DataPtr(cpu:0, byteOffset=64, byteLength=128)`.
   *
   * @returns The description.
   */
  override toString(): string {
    return `DataPtr(${this.device}, byteOffset=${this.#byteOffset}, byteLength=${this.#byteLength}${
      this.#released ? ", released" : ""
    })`;
  }

  #throwReleased(what: string): never {
    throw new UseAfterFreeError(
      `Cannot read ${what} of ${this}: the pointer was released`,
    );
  }
}
