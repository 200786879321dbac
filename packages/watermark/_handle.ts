/**
 * Internal: the handle class behind {@linkcode WatermarkBuffer}.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  UseAfterFreeError,
} from "@allot/core";
import type { _Block } from "./_block.ts";
import type { PoolKind, WatermarkBuffer } from "./watermark_buffer.ts";

/**
 * The most dimensions a buffer's shape may have (storage's `MAX_RANK`); a
 * longer array is refused before it is walked.
 */
export const MAX_SHAPE_RANK = 64;

/** What a handle needs from its allocator. */
export interface _Owner<M> {
  free(handle: _Handle<M>): void;
  isLive(handle: _Handle<M>): boolean;
  view(block: _Block<M>): Uint8Array | undefined;
}

/** A live buffer handle; a fresh one per allocation. */
export class _Handle<M> implements WatermarkBuffer<M> {
  readonly id: number;
  readonly byteLength: number;
  #block: _Block<M>;
  #owner: _Owner<M>;
  #requested: number;

  /**
   * Whether `value` is a handle this class made: not a Proxy of one, nor an
   * object whose prototype is one (`instanceof` says yes to both, and
   * reading their private fields throws a raw `TypeError`).
   */
  static _is(value: unknown): value is _Handle<unknown> {
    return typeof value === "object" && value !== null && #owner in value;
  }

  constructor(block: _Block<M>, owner: _Owner<M>) {
    this.id = block.id;
    this.byteLength = block.byteLength;
    this.#block = block;
    this.#owner = owner;
    this.#requested = block.requestedByteLength;
  }

  get released(): boolean {
    return !this.#owner.isLive(this);
  }

  get memory(): M {
    return this.#live("memory").heap.segment.memory;
  }

  get byteOffset(): number {
    const block = this.#live("byteOffset");
    return block.heap.segment.byteOffset + block.offset;
  }

  get requestedByteLength(): number {
    this.#live("requestedByteLength");
    return this.#requested;
  }

  get pool(): PoolKind {
    return this.#live("pool").heap.pool.kind;
  }

  get shared(): boolean {
    return this.#live("shared").heap.pool.hostVisible;
  }

  get heapId(): number {
    return this.#live("heapId").heap.id;
  }

  get shape(): readonly number[] {
    return [...this.#live("shape").shape];
  }

  set shape(shape: readonly number[]) {
    const block = this.#live("shape");
    if (!Array.isArray(shape)) {
      throw new InvalidArgumentError(
        `Cannot set the shape of buffer #${this.id}: must be an array of non-negative integers, received ${
          describeValue(shape)
        }`,
        { name: "shape", value: shape },
      );
    }
    // Copied first, each element read once (no iterator, no getter read
    // twice): what is checked is what is stored.
    const length = shape.length;
    if (length > MAX_SHAPE_RANK) {
      throw new InvalidArgumentError(
        `Cannot set the shape of buffer #${this.id}: rank ${length} exceeds the limit of ${MAX_SHAPE_RANK}`,
        { name: "shape.length", value: length, limit: MAX_SHAPE_RANK },
      );
    }
    const dims: number[] = [];
    for (let i = 0; i < length; i++) dims.push(shape[i]);
    for (let i = 0; i < length; i++) {
      const d = dims[i];
      if (!Number.isSafeInteger(d) || d < 0) {
        throw new InvalidArgumentError(
          `Cannot set the shape of buffer #${this.id}: dimension ${i} must be a non-negative integer, received ${
            describeValue(d)
          }`,
          { name: `shape[${i}]`, value: d, limit: 0 },
        );
      }
    }
    block.shape = dims;
  }

  sharedView(): Uint8Array | undefined {
    const block = this.#live("sharedView");
    if (!block.heap.pool.hostVisible) return undefined;
    return this.#owner.view(block);
  }

  release(): void {
    this.#owner.free(this);
  }

  belongsTo(owner: _Owner<M>): boolean {
    return this.#owner === owner;
  }

  [Symbol.dispose](): void {
    this.#owner.free(this);
  }

  toString(): string {
    return `WatermarkBuffer(#${this.id}, byteLength=${this.byteLength}${
      this.released ? ", released" : ""
    })`;
  }

  #live(what: string): _Block<M> {
    if (!this.#owner.isLive(this)) {
      throw new UseAfterFreeError(
        `Cannot read ${what} of buffer #${this.id}: the buffer was released`,
      );
    }
    return this.#block;
  }
}
