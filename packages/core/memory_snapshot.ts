/**
 * The snapshot and history format of pooling allocators, after PyTorch's
 * `torch.cuda.memory._snapshot()`: every segment with its blocks, and a ring
 * buffer of allocator events. Plain data: `JSON.stringify` writes it and
 * `JSON.parse` reads it back unchanged. The format is described in the
 * README of `@allot/caching` ("Snapshot format"); every pooling allocator
 * writes it.
 *
 * @module
 */

import { captureCallStack, formatCallStack } from "./call_stack.ts";
import { InvalidArgumentError } from "./errors.ts";
import { validateOptionKeys } from "./option_keys.ts";
import {
  describeValue,
  MAX_BYTE_LENGTH,
  optionOr,
  validateByteLength,
  validateFlag,
  validateObject,
} from "./validate.ts";

/** Version of the snapshot format written by this package. */
export const SNAPSHOT_FORMAT_VERSION = 1;

const _ACTIONS: ReadonlySet<string> = new Set([
  "alloc",
  "free_requested",
  "free_completed",
  "segment_alloc",
  "segment_free",
  "segment_map",
  "segment_unmap",
  "oom",
  "snapshot",
]);

/**
 * State of a block: handed out (`active_allocated`), freed by the caller but
 * waiting for fences of streams that used it (`active_pending_free`), or in the
 * pool (`inactive`). PyTorch's names.
 */
export type BlockState =
  | "active_allocated"
  | "active_pending_free"
  | "inactive";

/** One block of a segment. */
export interface BlockSnapshot {
  /** Virtual address: the segment's address plus `offset`. */
  address: number;
  /** Byte offset of the block in its segment. */
  offset: number;
  /** Byte length of the block (rounded size). */
  byteLength: number;
  /** Bytes the caller asked for (0 for inactive blocks). */
  requestedByteLength: number;
  /** The block's state. */
  state: BlockState;
  /** Stack captured at allocation, when history recording captures stacks. */
  stack?: string;
  /** Tag given at allocation (a layer or kernel name), if any. */
  tag?: string;
}

/** One segment taken from the device. */
export interface SegmentSnapshot {
  /** Segment id, unique for the allocator's lifetime. */
  id: number;
  /**
   * Virtual address of the segment's first byte. Addresses are assigned in
   * allocation order and never reused, so blocks of all segments can be drawn
   * on one axis.
   */
  address: number;
  /** Byte length of the segment. */
  byteLength: number;
  /** Id of the stream that owns the segment (0 is the default stream). */
  stream: number;
  /** The pool the segment serves. */
  pool: "small" | "large";
  /** Bytes of `active_allocated` blocks. */
  allocatedBytes: number;
  /** Bytes of `active_allocated` and `active_pending_free` blocks. */
  activeBytes: number;
  /** Requested bytes of active blocks. */
  requestedBytes: number;
  /** Byte offset of the segment in its device memory. */
  memoryByteOffset: number;
  /** The segment's blocks in address order; they tile the segment. */
  blocks: BlockSnapshot[];
}

/**
 * Kind of a history event (PyTorch's `TraceEntry` actions): a block handed
 * out, a block freed by the caller, a block back in the pool (after its
 * fences), a segment taken from or returned to the device, a segment grown
 * (`segment_map`) or shrunk (`segment_unmap`) in place (address and length of
 * the bytes added or given back), a request that ran out of memory, or a
 * marker written when a snapshot was taken.
 */
export type TraceAction =
  | "alloc"
  | "free_requested"
  | "free_completed"
  | "segment_alloc"
  | "segment_free"
  | "segment_map"
  | "segment_unmap"
  | "oom"
  | "snapshot";

/** One history event. */
export interface TraceEntry {
  /** What happened. */
  action: TraceAction;
  /**
   * Virtual address of the block or segment (for `oom`: bytes free on the
   * device, as PyTorch records it; for `snapshot`: 0).
   */
  address: number;
  /** Bytes of the block, segment or failed request (for `snapshot`: bytes reserved). */
  byteLength: number;
  /** Bytes the caller asked for (`alloc` and `oom`), else 0. */
  requestedByteLength: number;
  /** Stream id. */
  stream: number;
  /** Milliseconds since the allocator was made (`performance.now()` based). */
  timeMs: number;
  /** Stack captured at the event, when stack capture is on: the caller's
   * frames first, allot's own marked `[allot]`. */
  stack?: string;
  /** Tag of the allocation (`alloc`, `free_*`, `oom`), if one was given. */
  tag?: string;
}

/** A whole snapshot, as written by `snapshot()`. */
export interface MemorySnapshot {
  /** {@linkcode SNAPSHOT_FORMAT_VERSION}. */
  version: number;
  /** The device, such as `webgpu:0`. */
  device: string;
  /** Allocator label. */
  allocator: string;
  /** Segments in address order. */
  segments: SegmentSnapshot[];
  /** History events, oldest first; empty unless recording is on. */
  history: TraceEntry[];
  /**
   * Events the history ring buffer dropped (oldest first) since recording
   * started; absent when none were.
   */
  droppedEntries?: number;
}

/** Options of {@linkcode TraceRecorder}. */
export interface TraceRecorderOptions {
  /**
   * Events kept; older ones are dropped.
   *
   * @default {10000}
   */
  maxEntries?: number;
  /**
   * Capture the call stack with each event (slow; for debugging): up to 64
   * frames, the caller's first (see `captureCallStack`).
   *
   * @default {false}
   */
  captureStack?: boolean;
}

/**
 * A ring buffer of {@linkcode TraceEntry}: keeps the last `maxEntries` events
 * and counts the ones it dropped.
 *
 * @example
 * ```ts
 * import { TraceRecorder } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const history = new TraceRecorder({ maxEntries: 2 });
 * history.record("segment_alloc", 0, 2097152, 0, 0);
 * history.record("alloc", 0, 512, 500, 0);
 * history.record("free_requested", 0, 512, 500, 0);
 * assert.deepEqual(history.entries().map((e) => e.action), ["alloc", "free_requested"]);
 * assert.equal(history.droppedEntries, 1);
 * ```
 */
export class TraceRecorder {
  /** Events kept. */
  readonly maxEntries: number;
  /** Whether stacks are captured. */
  readonly captureStack: boolean;
  #ring: TraceEntry[] = [];
  #next = 0;
  #dropped = 0;
  #origin = performance.now();

  /**
   * Creates an empty recorder.
   *
   * @param options Capacity and stack capture.
   * @throws {InvalidArgumentError} When `maxEntries` is not a positive integer.
   */
  constructor(options: TraceRecorderOptions = {}) {
    validateObject(options, "options");
    validateOptionKeys(
      options,
      ["maxEntries", "captureStack"],
      "TraceRecorder",
    );
    const max = optionOr(options.maxEntries, 10000);
    if (!Number.isSafeInteger(max) || max < 1) {
      throw new InvalidArgumentError(
        `Invalid maxEntries: must be a positive integer, received ${
          describeValue(max)
        }`,
        { name: "maxEntries", value: max, limit: "a positive integer" },
      );
    }
    this.maxEntries = max;
    this.captureStack = validateFlag(
      options.captureStack,
      "captureStack",
      false,
    );
  }

  /** Number of events kept now. */
  get size(): number {
    return this.#ring.length;
  }

  /** Events dropped because the ring buffer was full, since the last `clear()`. */
  get droppedEntries(): number {
    return this.#dropped;
  }

  /**
   * Appends an event, dropping the oldest one when full.
   *
   * @param action What happened.
   * @param address Virtual address.
   * @param byteLength Bytes of the block or segment.
   * @param requestedByteLength Bytes asked for.
   * @param stream Stream id.
   * @param tag The allocation's tag, if any.
   * @throws {InvalidArgumentError} When `action` is not a
   * {@linkcode TraceAction}, a number is not a non-negative safe integer, or
   * `tag` is not a string; nothing is recorded.
   */
  record(
    action: TraceAction,
    address: number,
    byteLength: number,
    requestedByteLength: number,
    stream: number,
    tag?: string,
  ): void {
    if (!_ACTIONS.has(action)) {
      throw new InvalidArgumentError(
        `Invalid action: must be one of ${[..._ACTIONS].join(", ")}, received ${
          describeValue(action)
        }`,
        { name: "action", value: action, limit: [..._ACTIONS] },
      );
    }
    validateByteLength(address, MAX_BYTE_LENGTH, "address");
    validateByteLength(byteLength, MAX_BYTE_LENGTH, "byteLength");
    validateByteLength(
      requestedByteLength,
      MAX_BYTE_LENGTH,
      "requestedByteLength",
    );
    validateByteLength(stream, MAX_BYTE_LENGTH, "stream");
    if (tag !== undefined && typeof tag !== "string") {
      throw new InvalidArgumentError(
        `Invalid tag: must be a string, received ${describeValue(tag)}`,
        { name: "tag", value: tag, limit: "a string" },
      );
    }
    const entry: TraceEntry = {
      action,
      address,
      byteLength,
      requestedByteLength,
      stream,
      timeMs: performance.now() - this.#origin,
    };
    if (tag !== undefined) entry.tag = tag;
    if (this.captureStack) entry.stack = captureStack();
    if (this.#ring.length < this.maxEntries) {
      this.#ring.push(entry);
    } else {
      this.#dropped++;
      this.#ring[this.#next] = entry;
      this.#next = (this.#next + 1) % this.maxEntries;
    }
  }

  /**
   * The events, oldest first (copies).
   *
   * @returns The events.
   */
  entries(): TraceEntry[] {
    const ring = this.#ring;
    const out: TraceEntry[] = [];
    for (let i = 0; i < ring.length; i++) {
      out.push({ ...ring[(this.#next + i) % ring.length] });
    }
    return out;
  }

  /** Drops every event. */
  clear(): void {
    this.#ring = [];
    this.#next = 0;
    this.#dropped = 0;
  }
}

/**
 * The caller's stack for a history entry: up to 64 frames, the caller's own
 * first and allot's marked (see {@linkcode captureCallStack}).
 *
 * @returns The stack text.
 *
 * @example
 * ```ts
 * import { captureStack } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const stack = captureStack();
 * assert.equal(typeof stack, "string");
 * assert.ok(stack.split("\n").length <= 64);
 * ```
 */
export function captureStack(): string {
  return formatCallStack(captureCallStack({ skipFrames: 1 }));
}
