/**
 * {@linkcode SegmentSourceError}, {@linkcode acquireSegment},
 * {@linkcode resizeSegment} and {@linkcode releaseSegment}: taking, resizing
 * and returning a segment of a {@linkcode SegmentSource} without trusting it,
 * written once for every pooling allocator.
 *
 * @module
 */

import { AllotError, InvalidArgumentError } from "./errors.ts";
import { describeValue, validateByteLength } from "./validate.ts";
import type {
  Segment,
  SegmentRequestOptions,
  SegmentSource,
} from "./segment_source.ts";

/**
 * The segment source threw while making or releasing a segment, or returned
 * one that does not hold what was asked (shorter, misaligned, malformed): a
 * faulty device, as opposed to one that is out of memory. The allocator's
 * pools are unchanged; the device's error, if any, is the `cause`.
 *
 * @example
 * ```ts
 * import { acquireSegment, MockSegmentSource, SegmentSourceError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource();
 * device.throwNext();
 * assert.throws(() => acquireSegment(device, 4096, 100), SegmentSourceError);
 * ```
 */
export class SegmentSourceError extends AllotError {}

/**
 * Segment records `acquireSegment` handed to a pool and `releaseSegment` has
 * not taken back: a source that returns one of them again (a lying source,
 * giving the same segment twice) is refused without the record being freed,
 * since freeing it would free the live segment of the pool that holds it.
 */
const _live = new WeakSet<object>();

/**
 * Takes a segment of `byteLength` bytes from `source` and checks it: a
 * segment shorter than asked, at a byte offset that is not a non-negative
 * multiple of `source.alignment`, or not an object at all is given back to
 * the source and refused.
 *
 * @typeParam M Type of the segment memory.
 * @param source The segment source.
 * @param byteLength Bytes of the segment.
 * @param forBytes Bytes of the request the segment is for (for messages).
 * @param options Passed to `tryAllocateSegment`.
 * @returns The segment, or `undefined` when the device is full.
 * @throws {SegmentSourceError} When the source threw or returned a segment
 * that does not hold `byteLength` bytes.
 *
 * @example
 * ```ts
 * import { acquireSegment, MockSegmentSource } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource({ capacityBytes: 4096 });
 * assert.equal(acquireSegment(device, 4096, 100)?.byteLength, 4096);
 * assert.equal(acquireSegment(device, 4096, 100), undefined); // full
 * ```
 */
export function acquireSegment<M>(
  source: SegmentSource<M>,
  byteLength: number,
  forBytes: number,
  options?: SegmentRequestOptions,
): Segment<M> | undefined {
  _checkSource(source, `allocate ${describeValue(forBytes)} bytes`);
  let segment: Segment<M> | undefined;
  try {
    segment = source.tryAllocateSegment(byteLength, options);
  } catch (error) {
    throw new SegmentSourceError(
      `Cannot allocate ${forBytes} bytes: the segment source of ${
        _deviceOf(source)
      } threw while making a ${byteLength}-byte segment: ${
        describeError(error)
      }`,
      { cause: error },
    );
  }
  if (segment === undefined || segment === null) return undefined;
  if (typeof segment === "object" && _live.has(segment)) {
    // not given back: it is a pool's live segment
    throw new SegmentSourceError(
      `Cannot allocate ${forBytes} bytes: the segment source of ${
        _deviceOf(source)
      } returned a segment it had already given out and not got back (refused, and not freed: it is in use)`,
    );
  }
  let problem: string | undefined;
  let cause: unknown = undefined;
  try {
    problem = _segmentProblem(source, segment, byteLength);
  } catch (error) {
    // a segment whose fields throw when read is refused like a short one
    problem = `returned a segment whose fields throw when read: ${
      describeError(error)
    }`;
    cause = error;
  }
  if (problem === undefined) {
    _live.add(segment);
    return segment;
  }
  if (typeof segment === "object") {
    try {
      source.freeSegment(segment);
    } catch {
      // refused anyway; the source is faulty
    }
  }
  throw new SegmentSourceError(
    `Cannot allocate ${forBytes} bytes: the segment source of ${
      _deviceOf(source)
    } ${problem}`,
    cause === undefined ? undefined : { cause },
  );
}

function _segmentProblem<M>(
  source: SegmentSource<M>,
  segment: Segment<M>,
  byteLength: number,
): string | undefined {
  if (typeof segment !== "object") {
    return `returned ${describeValue(segment)}, not a segment`;
  }
  const length = segment.byteLength, offset = segment.byteOffset;
  if (!Number.isSafeInteger(length) || length < byteLength) {
    return `returned a segment of ${
      describeValue(length)
    } bytes for a ${byteLength}-byte request`;
  }
  if (
    !Number.isSafeInteger(offset) || offset < 0 ||
    offset % source.alignment !== 0
  ) {
    return `returned a segment at byte offset ${
      describeValue(offset)
    }, not a multiple of its alignment ${source.alignment}`;
  }
  return undefined;
}

/**
 * Resizes a segment in place with `source.tryResizeSegment` and checks the
 * result: the same memory at the same byte offset, with the length asked.
 * The request is checked before the source is called (a source that would
 * resize to any length it is given is never asked for a bad one), and the
 * caller commits nothing until a checked record comes back: a source that
 * returns a malformed record gets a {@linkcode SegmentSourceError} and the
 * caller's books stay as they were (the source's own books are its fault).
 *
 * @typeParam M Type of the segment memory.
 * @param source The segment source (it must have `tryResizeSegment`).
 * @param segment A live segment of the source.
 * @param byteLength The new length.
 * @param forBytes Bytes of the request the resize is for (for messages).
 * @returns The resized segment, or `undefined` when the device cannot.
 * @throws {InvalidArgumentError} When `segment` is not an object or
 * `byteLength` is not an integer in `[1, source.maxSegmentByteLength]`; the
 * source is not called.
 * @throws {SegmentSourceError} When the source threw or returned a segment
 * that is not the same memory with the new length.
 *
 * @example
 * ```ts
 * import { MockSegmentSource, resizeSegment } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource({ capacityBytes: 4096 });
 * const a = device.tryAllocateSegment(1024, { resizable: true })!;
 * assert.equal(resizeSegment(device, a, 2048, 1024)?.byteLength, 2048);
 * ```
 */
export function resizeSegment<M>(
  source: SegmentSource<M>,
  segment: Segment<M>,
  byteLength: number,
  forBytes: number,
): Segment<M> | undefined {
  _checkSource(
    source,
    `resize a segment to ${describeValue(byteLength)} bytes`,
  );
  if (typeof source.tryResizeSegment !== "function") return undefined;
  if (typeof segment !== "object" || segment === null) {
    throw new InvalidArgumentError(
      `Invalid segment: must be a segment object, received ${
        describeValue(segment)
      }`,
      { name: "segment", value: segment, limit: "Segment" },
    );
  }
  const max = source.maxSegmentByteLength;
  validateByteLength(byteLength, max);
  if (byteLength === 0) {
    throw new InvalidArgumentError(
      "Invalid byteLength: a segment must be at least 1 byte, received 0",
      { name: "byteLength", value: 0, limit: 1 },
    );
  }
  let resized: Segment<M> | undefined;
  try {
    resized = source.tryResizeSegment(segment, byteLength);
  } catch (error) {
    throw new SegmentSourceError(
      `Cannot allocate ${forBytes} bytes: the segment source of ${
        _deviceOf(source)
      } threw while resizing ${_segmentText(segment)} to ${byteLength} bytes: ${
        describeError(error)
      }`,
      { cause: error },
    );
  }
  if (resized === undefined || resized === null) return undefined;
  let moved = true, got: unknown = undefined, cause: unknown = undefined;
  try {
    if (typeof resized === "object") {
      got = resized.byteLength;
      moved = resized.memory !== segment.memory ||
        resized.byteOffset !== segment.byteOffset || got !== byteLength;
    }
  } catch (error) {
    // a segment whose fields throw when read is refused like a moved one
    cause = error;
  }
  if (moved) {
    throw new SegmentSourceError(
      `Cannot allocate ${forBytes} bytes: the segment source of ${
        _deviceOf(source)
      } resized ${_segmentText(segment)} to ${
        typeof resized === "object" && cause === undefined
          ? describeValue(got)
          : "nothing"
      } bytes (asked ${byteLength}), or moved it`,
      cause === undefined ? undefined : { cause },
    );
  }
  // the resized record replaces the one it was made from
  _live.delete(segment);
  _live.add(resized as object);
  return resized;
}

/**
 * Gives a segment back to `source`, wrapping an error the source throws in
 * {@linkcode SegmentSourceError} (the source's error is the `cause`).
 *
 * @typeParam M Type of the segment memory.
 * @param source The segment source.
 * @param segment A live segment of the source.
 * @param what The segment, for the message (`segment 3 of 2097152 bytes`).
 * @throws {SegmentSourceError} When the source threw.
 *
 * @example
 * ```ts
 * import { MockSegmentSource, releaseSegment, SegmentSourceError } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const device = new MockSegmentSource();
 * const segment = device.tryAllocateSegment(4096)!;
 * releaseSegment(device, segment, "segment 1 of 4096 bytes");
 * assert.throws(() => releaseSegment(device, segment, "segment 1"), SegmentSourceError);
 * ```
 */
export function releaseSegment<M>(
  source: SegmentSource<M>,
  segment: Segment<M>,
  what: string,
): void {
  _checkSource(source, `return ${what}`);
  if (typeof segment === "object" && segment !== null) _live.delete(segment);
  try {
    source.freeSegment(segment);
  } catch (error) {
    throw new SegmentSourceError(
      `Cannot return ${what}: the segment source of ${
        _deviceOf(source)
      } threw: ${describeError(error)}`,
      { cause: error },
    );
  }
}

/**
 * Refuses a source that is not an object (`null` threw a raw `TypeError`
 * when its methods were read): the caller passed no collaborator, which is
 * its error, not the device's.
 */
function _checkSource(source: unknown, what: string): void {
  if (
    (typeof source !== "object" && typeof source !== "function") ||
    source === null
  ) {
    throw new InvalidArgumentError(
      `Cannot ${what}: source must be a segment source, received ${
        describeValue(source)
      }`,
      { name: "source", value: source, limit: "SegmentSource" },
    );
  }
}

/** The source's device for a message; a device that cannot be printed is described. */
function _deviceOf(source: { readonly device: unknown }): string {
  try {
    const device = source.device;
    return typeof device === "object" && device !== null
      ? String(device)
      : typeof device === "string"
      ? device
      : describeValue(device);
  } catch {
    return "an unprintable device";
  }
}

/** "a 4096-byte segment" for a message, read without trusting it. */
function _segmentText(segment: { readonly byteLength: unknown }): string {
  try {
    return `a ${describeValue(segment.byteLength)}-byte segment`;
  } catch {
    return "a segment whose byteLength cannot be read";
  }
}

function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  try {
    return String(error);
  } catch {
    return "an unprintable value";
  }
}
