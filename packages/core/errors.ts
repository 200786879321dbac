/**
 * The typed errors every allot package throws. All of them extend
 * {@linkcode AllotError}, so one `instanceof` check catches anything allot
 * refused; each subclass carries the numbers a caller needs to react.
 *
 * @module
 */

/**
 * Base class of every error allot throws.
 *
 * @example Catch anything allot refused
 * ```ts
 * import { AllotError, InvalidArgumentError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * try {
 *   throw new InvalidArgumentError("Cannot allocate -1 bytes: byteLength must be a non-negative integer, received -1", { name: "byteLength", value: -1 });
 * } catch (error) {
 *   assert.ok(error instanceof AllotError);
 * }
 * ```
 */
export class AllotError extends Error {
  /**
   * Creates an allot error.
   *
   * @param message Sentence-case message that states the value and the limit.
   * @param options Standard error options (`cause`).
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Details of an {@linkcode InvalidArgumentError}. */
export interface InvalidArgumentDetails {
  /** Name of the offending argument or field. */
  name: string;
  /** The value that was received. */
  value: unknown;
  /** The limit or rule the value broke, when there is one. */
  limit?: unknown;
}

/**
 * A size, alignment, shape, index or option was out of range. The message
 * states the value and the limit; the same facts are fields on the error.
 *
 * @example
 * ```ts
 * import { InvalidArgumentError, validateByteLength } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.throws(() => validateByteLength(1.5), InvalidArgumentError);
 * ```
 */
export class InvalidArgumentError extends AllotError {
  /** Name of the offending argument. */
  readonly argument: string;
  /** The value that was received. */
  readonly value: unknown;
  /** The limit or rule the value broke, when there is one. */
  readonly limit: unknown;

  /**
   * Creates an invalid-argument error.
   *
   * @param message Message that states the value and the limit.
   * @param details The argument name, value and limit.
   * @param options Standard error options (`cause`).
   */
  constructor(
    message: string,
    details: InvalidArgumentDetails,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.argument = details.name;
    this.value = details.value;
    this.limit = details.limit;
  }
}

/** The numbers an out-of-memory report needs. All values are bytes. */
export interface OutOfMemoryDetails {
  /** Bytes the failed request asked for (after rounding, if any). */
  requestedBytes: number;
  /** Total capacity of the memory the allocator manages, if known. */
  capacityBytes?: number;
  /** Bytes still free (not handed out), if known. */
  freeBytes?: number;
  /** Largest contiguous free region, if known. */
  largestFreeBytes?: number;
  /** Bytes handed out by this allocator, if known. */
  allocatedBytes?: number;
  /** Bytes reserved from the device by this allocator, if known. */
  reservedBytes?: number;
}

/**
 * An allocation could not be served. Carries the figures of the failed request
 * so callers can free memory and retry, or print a useful report.
 *
 * @example
 * ```ts
 * import { OutOfMemoryError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const error = new OutOfMemoryError("Cannot allocate 4096 bytes: 1024 bytes free", { requestedBytes: 4096, freeBytes: 1024 });
 * assert.equal(error.requestedBytes, 4096);
 * ```
 */
export class OutOfMemoryError extends AllotError {
  /** Bytes the failed request asked for. */
  readonly requestedBytes: number;
  /** Total capacity, or `undefined` when unknown. */
  readonly capacityBytes: number | undefined;
  /** Free bytes, or `undefined` when unknown. */
  readonly freeBytes: number | undefined;
  /** Largest contiguous free region, or `undefined` when unknown. */
  readonly largestFreeBytes: number | undefined;
  /** Bytes handed out by the allocator, or `undefined` when unknown. */
  readonly allocatedBytes: number | undefined;
  /** Bytes reserved from the device, or `undefined` when unknown. */
  readonly reservedBytes: number | undefined;

  /**
   * Creates an out-of-memory error.
   *
   * @param message Message that states the request and what was available.
   * @param details The figures of the failed request.
   * @param options Standard error options (`cause`).
   */
  constructor(
    message: string,
    details: OutOfMemoryDetails,
    options?: ErrorOptions,
  ) {
    super(message, options);
    // an error is being built: details that are not an object (null threw a
    // raw TypeError here, hiding the out-of-memory error) leave the figures
    // unknown
    if (typeof details !== "object" || details === null) {
      details = {} as OutOfMemoryDetails;
    }
    this.requestedBytes = details.requestedBytes;
    this.capacityBytes = details.capacityBytes;
    this.freeBytes = details.freeBytes;
    this.largestFreeBytes = details.largestFreeBytes;
    this.allocatedBytes = details.allocatedBytes;
    this.reservedBytes = details.reservedBytes;
  }
}

/**
 * Memory, a handle or a reference was released twice, or something was freed
 * into an allocator that never handed it out.
 *
 * @example
 * ```ts
 * import { DoubleFreeError, UniqueVoidPtr } from "@allot/core";
 * import assert from "node:assert/strict";
 * import { IntrusivePtr, IntrusiveTarget } from "@allot/core";
 *
 * const strong = IntrusivePtr.make(new IntrusiveTarget());
 * strong.release();
 * assert.throws(() => strong.release(), DoubleFreeError);
 * ```
 */
export class DoubleFreeError extends AllotError {}

/**
 * A handle was used after its memory was released.
 *
 * @example
 * ```ts
 * import { DataPtr, Device, UseAfterFreeError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const ptr = new DataPtr(new ArrayBuffer(8), 0, 8, Device.cpu(), { context: "ctx", deleter: () => {} });
 * ptr.clear();
 * assert.throws(() => ptr.memory, UseAfterFreeError);
 * ```
 */
export class UseAfterFreeError extends AllotError {}

/**
 * The operation is not supported by this allocator or object, such as
 * `rawAllocate` on an allocator without a raw deleter.
 *
 * @example
 * ```ts
 * import { UnsupportedOperationError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * assert.ok(new UnsupportedOperationError("Cannot rawAllocate: no raw deleter") instanceof Error);
 * ```
 */
export class UnsupportedOperationError extends AllotError {}

/**
 * A collaborator broke its contract: an allocator returned a block shorter
 * than asked or already released, a segment source a short or misaligned
 * segment, a fence completed and then went back. The receiving allocator
 * refuses what it was given (and frees it where it can) instead of trusting
 * it; its own state is unchanged.
 *
 * @example
 * ```ts
 * import { AllotError, ContractViolationError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const error = new ContractViolationError(
 *   "Cannot use a block of 8 bytes: the allocator was asked for 16",
 * );
 * assert.ok(error instanceof AllotError);
 * ```
 */
export class ContractViolationError extends AllotError {}
