/**
 * Internal: {@linkcode _BufferEvents}, the watermark allocator's lifecycle
 * callbacks and debug log (MPS's `BufferBlock` callbacks and
 * `debug_verbosity`).
 *
 * @module
 */

import { InvalidArgumentError } from "@allot/core";
import type { _Block } from "./_block.ts";
import type { _Pool } from "./_pool.ts";
import { DebugVerbosity } from "./debug_verbosity.ts";
import type {
  BufferCallback,
  BufferEvent,
  BufferEventType,
  ReleaseReason,
} from "./watermark_buffer.ts";

/** Registered callbacks, the logger and its verbosity. */
export class _BufferEvents<M> {
  // Replaced, never changed in place: an emit in progress keeps its list.
  callbacks: BufferCallback[] = [];
  constructor(
    readonly verbosity: number,
    readonly logger: (line: string) => void,
  ) {}

  /** Registers a callback; returns its remover. */
  add(callback: BufferCallback): () => void {
    if (typeof callback !== "function") {
      throw new InvalidArgumentError(
        `Cannot add callback: must be a function, received ${typeof callback}`,
        { name: "callback", value: callback },
      );
    }
    this.callbacks = [...this.callbacks, callback];
    return () => {
      this.remove(callback);
    };
  }

  /** Removes a callback; whether it was registered. */
  remove(callback: BufferCallback): boolean {
    const i = this.callbacks.indexOf(callback);
    if (i < 0) return false;
    this.callbacks = this.callbacks.filter((_, j) => j !== i);
    return true;
  }

  /** Calls every callback with the event (one that throws is logged). */
  emit(
    type: BufferEventType,
    block: _Block<M> | undefined,
    pool: _Pool<M>,
    byteLength: number,
    reason?: ReleaseReason,
  ): void {
    const callbacks = this.callbacks;
    if (callbacks.length === 0) return;
    const event: BufferEvent = Object.freeze({
      type,
      bufferId: block ? block.id : 0,
      byteLength: block ? block.byteLength : byteLength,
      requestedByteLength: block ? block.requestedByteLength : byteLength,
      pool: pool.kind,
      heapId: block ? block.heap.id : 0,
      ...(reason ? { reason } : {}),
    });
    for (const callback of callbacks) {
      try {
        callback(event);
      } catch (error) {
        // Neither an unprintable error nor a throwing logger may escape into
        // the allocator's operation, half done.
        try {
          this.logger(
            `Buffer callback failed on ${type} event: ${describeError(error)}`,
          );
        } catch {
          // the logger threw: nothing more to report with
        }
      }
    }
  }

  /** Writes a debug line when `bit` of the verbosity is set. */
  log(bit: number, pool: _Pool<M> | undefined, line: () => string): void {
    const v = this.verbosity;
    if (!(v & bit)) return;
    if ((v & DebugVerbosity.largeOnly) && pool && pool.small) return;
    try {
      this.logger(line());
    } catch {
      // a throwing logger must not stop an operation half done
    }
  }
}

function describeError(error: unknown): string {
  try {
    return error instanceof Error ? String(error.message) : String(error);
  } catch {
    return "an unprintable value";
  }
}
