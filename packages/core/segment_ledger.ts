/**
 * {@linkcode SegmentLedger}: the bookkeeping every {@linkcode SegmentSource}
 * keeps (live segments, reserved and peak bytes, counts), written once.
 *
 * @module
 */

import { DoubleFreeError, InvalidArgumentError } from "./errors.ts";
import type { Segment } from "./segment_source.ts";
import { describeValue, validateByteLength } from "./validate.ts";

/**
 * The live segments of one segment source and the figures over them: bytes
 * reserved now and at the peak, segments made and freed. A source checks a
 * request with {@linkcode SegmentLedger.checkRequest} and
 * {@linkcode SegmentLedger.fits}, makes the memory, then
 * {@linkcode SegmentLedger.add}s it; `freeSegment` calls
 * {@linkcode SegmentLedger.remove}, which refuses a segment that is not
 * live. Refused calls change nothing.
 *
 * The bytes counted for a segment may differ from its `byteLength` (a GPU
 * buffer rounded up to 4 bytes); pass the same count to `add` and `remove`.
 *
 * @typeParam M Type of the memory of a segment.
 *
 * @example A source's figures
 * ```ts
 * import { SegmentLedger } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const ledger = new SegmentLedger<ArrayBuffer>("my source");
 * ledger.checkRequest(1024, 1 << 20);
 * assert.ok(ledger.fits(1024, 4096));
 * const segment = { memory: new ArrayBuffer(1024), byteOffset: 0, byteLength: 1024 };
 * ledger.add(segment);
 * assert.equal(ledger.reservedBytes, 1024);
 * assert.ok(!ledger.fits(3584, 4096));
 * ledger.remove(segment);
 * assert.equal(ledger.reservedBytes, 0);
 * assert.equal(ledger.peakReservedBytes, 1024);
 * assert.throws(() => ledger.remove(segment));
 * ```
 */
export class SegmentLedger<M = unknown> {
  /** Who keeps the ledger, for messages (`"mock:0"`, a class name). */
  readonly owner: string;
  #live = new Map<Segment<M>, number>();
  #reserved = 0;
  #peak = 0;
  #allocations = 0;
  #frees = 0;

  /**
   * Creates an empty ledger.
   *
   * @param owner Who keeps it, for messages.
   */
  constructor(owner: string) {
    this.owner = owner;
  }

  /** Bytes counted for live segments. */
  get reservedBytes(): number {
    return this.#reserved;
  }

  /** Highest `reservedBytes` so far. */
  get peakReservedBytes(): number {
    return this.#peak;
  }

  /** Segments added so far. */
  get allocationCount(): number {
    return this.#allocations;
  }

  /** Segments removed so far (not counting {@linkcode SegmentLedger.clear}). */
  get freeCount(): number {
    return this.#frees;
  }

  /** Number of live segments. */
  get liveSegmentCount(): number {
    return this.#live.size;
  }

  /**
   * Checks a segment request: a safe integer in `[1, maxByteLength]`.
   *
   * @param byteLength The requested length.
   * @param maxByteLength The source's largest segment.
   * @throws {InvalidArgumentError} Naming the length and the limit.
   */
  checkRequest(byteLength: number, maxByteLength: number): void {
    validateByteLength(byteLength, maxByteLength);
    if (byteLength === 0) {
      throw new InvalidArgumentError(
        "Invalid byteLength: a segment must be at least 1 byte, received 0",
        { name: "byteLength", value: 0, limit: 1 },
      );
    }
  }

  /**
   * Whether `bytes` more stay within `capacityBytes`.
   *
   * @param bytes Bytes a new segment would count.
   * @param capacityBytes The source's capacity (`Infinity` for none).
   * @returns `true` when they fit.
   */
  fits(bytes: number, capacityBytes: number): boolean {
    return this.#reserved + bytes <= capacityBytes;
  }

  /**
   * Whether `segment` is live here.
   *
   * @param segment A segment.
   * @returns `true` when added and not yet removed.
   */
  has(segment: Segment<M>): boolean {
    return this.#live.has(segment);
  }

  /**
   * Records a new live segment.
   *
   * @param segment The segment just made.
   * @param bytes Bytes to count for it.
   * @throws {InvalidArgumentError} For a count that is not a non-negative
   * safe integer, or a segment already live; nothing changes.
   */
  add(segment: Segment<M>, bytes?: number): void {
    _requireSegment(segment, "segment");
    bytes = validateByteLength(
      bytes === undefined ? _lengthOf(segment, "segment") : bytes,
      Number.MAX_SAFE_INTEGER - this.#reserved,
      "bytes",
    );
    if (this.#live.has(segment)) {
      throw new InvalidArgumentError(
        `Invalid segment: it is already live in ${this.owner}`,
        { name: "segment", value: segment.byteLength },
      );
    }
    this.#live.set(segment, bytes);
    this.#reserved += bytes;
    this.#allocations++;
    if (this.#reserved > this.#peak) this.#peak = this.#reserved;
  }

  /**
   * Forgets a live segment; the caller then frees its memory.
   *
   * @param segment A live segment.
   * @returns The bytes that were counted for it.
   * @throws {DoubleFreeError} When it is not live here (freed twice, or
   * another source's); nothing changes.
   */
  remove(segment: Segment<M>): number {
    const bytes = this.#live.get(segment);
    if (bytes === undefined) {
      throw new DoubleFreeError(
        `Cannot free a segment of ${
          _lengthText(segment)
        }: it is not a live segment of ${this.owner}`,
      );
    }
    this.#live.delete(segment);
    this.#reserved -= bytes;
    this.#frees++;
    return bytes;
  }

  /**
   * Bytes counted for a live segment.
   *
   * @param segment A live segment.
   * @returns The bytes counted for it.
   * @throws {DoubleFreeError} When it is not live here.
   */
  bytesOf(segment: Segment<M>): number {
    const bytes = this.#live.get(segment);
    if (bytes === undefined) {
      throw new DoubleFreeError(
        `Cannot resize a segment of ${
          _lengthText(segment)
        }: it is not a live segment of ${this.owner}`,
      );
    }
    return bytes;
  }

  /**
   * Records that a live segment changed length in place: `resized` (its new
   * record) replaces `segment`, counted for `bytes`. Not a new allocation.
   *
   * @param segment A live segment.
   * @param resized Its record after the resize.
   * @param bytes Bytes to count for it now.
   * @throws {DoubleFreeError} When `segment` is not live here; nothing changes.
   * @throws {InvalidArgumentError} When `resized` is another live segment, or
   * the reserved bytes would pass 2^53 - 1; nothing changes.
   * @throws {InvalidArgumentError} For a count that is not a non-negative
   * safe integer; nothing changes.
   */
  replace(
    segment: Segment<M>,
    resized: Segment<M>,
    bytes?: number,
  ): void {
    _requireSegment(resized, "resized");
    const old = this.bytesOf(segment);
    bytes = validateByteLength(
      bytes === undefined ? _lengthOf(resized, "resized") : bytes,
      Number.MAX_SAFE_INTEGER - (this.#reserved - old),
      "bytes",
    );
    if (resized !== segment && this.#live.has(resized)) {
      throw new InvalidArgumentError(
        `Invalid resized segment: it is another live segment of ${this.owner}`,
        { name: "resized", value: resized.byteLength },
      );
    }
    this.#live.delete(segment);
    this.#live.set(resized, bytes);
    this.#reserved += bytes - old;
    if (this.#reserved > this.#peak) this.#peak = this.#reserved;
  }

  /**
   * Forgets every live segment at once (the device is gone) and returns
   * them, so the caller can try to free their memory.
   *
   * @returns The segments that were live.
   */
  clear(): Segment<M>[] {
    const live = [...this.#live.keys()];
    this.#live.clear();
    this.#reserved = 0;
    return live;
  }
}

function _requireSegment(segment: unknown, name: string): void {
  if (typeof segment !== "object" || segment === null) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a segment object, received ${
        describeValue(segment)
      }`,
      { name, value: segment, limit: "Segment" },
    );
  }
}

/** A segment's byteLength, read once; a read that throws is refused (typed). */
function _lengthOf(segment: object, name: string): number {
  try {
    return (segment as { byteLength: number }).byteLength;
  } catch (error) {
    throw new InvalidArgumentError(
      `Invalid ${name}: its byteLength cannot be read (${
        error instanceof Error ? error.message : "a non-error was thrown"
      })`,
      { name, value: segment, limit: "Segment" },
      { cause: error },
    );
  }
}

/** "4096 bytes" for a message, whatever the segment is (read without trusting it). */
function _lengthText(segment: unknown): string {
  try {
    const n = (segment as { byteLength?: unknown } | null | undefined)
      ?.byteLength;
    return `${describeValue(n)} bytes`;
  } catch {
    return "unreadable length";
  }
}
