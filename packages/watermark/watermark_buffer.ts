/**
 * {@linkcode WatermarkBuffer}: a buffer handed out by the watermark
 * allocator, with its metadata; and {@linkcode BufferEvent}, what lifecycle
 * callbacks receive.
 *
 * @module
 */

/**
 * The pool a buffer comes from: `private` (device-only), `shared`
 * (host-visible: mappable device memory or host memory the device reads) or
 * `scalar` (small host-visible constants).
 */
export type PoolKind = "private" | "shared" | "scalar";

/**
 * A live buffer from a {@linkcode WatermarkAllocator}: a place in a heap
 * (memory, byte offset, byte length) plus the metadata MPS keeps per buffer.
 * Release it exactly once with `release()` or `using`; after that every
 * property but `id`, `byteLength` and `released` throws `UseAfterFreeError`.
 *
 * @typeParam M Type of the segment memory (`GPUBuffer`, `ArrayBuffer`, ...).
 */
export interface WatermarkBuffer<M = unknown> {
  /** Unique id of the buffer; a recycled buffer keeps its id. */
  readonly id: number;
  /** The heap's memory the buffer lives in. */
  readonly memory: M;
  /** Byte offset of the buffer in `memory`. */
  readonly byteOffset: number;
  /** Size after alignment: the bytes the buffer occupies. */
  readonly byteLength: number;
  /** Size the caller asked for (the unaligned size). */
  readonly requestedByteLength: number;
  /** The pool the buffer comes from. */
  readonly pool: PoolKind;
  /** Whether the buffer is host-visible (`shared` and `scalar` pools). */
  readonly shared: boolean;
  /** Id of the heap that holds the buffer. */
  readonly heapId: number;
  /** Whether the buffer was released. */
  readonly released: boolean;
  /**
   * Shape of the tensor stored in the buffer (MPS keeps it to find the base
   * of views); empty until set, reset when the buffer is freed. Reading gives
   * a copy; setting validates at most 64 non-negative safe integers.
   */
  shape: readonly number[];
  /**
   * Host bytes of a shared buffer (`requestedByteLength` long), when the
   * segment's memory has host bytes.
   *
   * @returns The view, or `undefined` for a private buffer or a memory
   * without host bytes.
   */
  sharedView(): Uint8Array | undefined;
  /** Frees the buffer into its pool (after its recorded work completes). */
  release(): void;
  /** Same as `release()`, for `using`. */
  [Symbol.dispose](): void;
}

/** The lifecycle events of buffers, as in MPS's `IMpsAllocatorCallback`. */
export type BufferEventType =
  | "allocated"
  | "recycled"
  | "freed"
  | "released"
  | "allocation-failed";

/** Why a cached buffer was given back to its heap. */
export type ReleaseReason =
  | "garbage-collection"
  | "oversize"
  | "release-cached"
  | "empty-cache";

/**
 * What a callback receives: `allocated` (a new buffer was made in a heap),
 * `recycled` (a cached buffer was handed out again), `freed` (a buffer
 * returned to its pool, once its recorded work completed), `released` (a
 * cached buffer was given back to its heap), `allocation-failed` (a request
 * found no memory; the callback may free buffers, the allocator retries).
 */
export interface BufferEvent {
  /** What happened. */
  readonly type: BufferEventType;
  /** Id of the buffer; 0 for `allocation-failed`. */
  readonly bufferId: number;
  /** Aligned size of the buffer (the request for `allocation-failed`). */
  readonly byteLength: number;
  /** Size the last user asked for. */
  readonly requestedByteLength: number;
  /** The buffer's pool. */
  readonly pool: PoolKind;
  /** Id of the heap; 0 for `allocation-failed`. */
  readonly heapId: number;
  /** For `released`: why. */
  readonly reason?: ReleaseReason;
}

/** A lifecycle callback. */
export type BufferCallback = (event: BufferEvent) => void;
