/**
 * {@linkcode LeakDetector}: reports owning handles that were garbage-collected
 * without being released. It never frees anything: release stays explicit.
 *
 * @module
 */

import { InvalidArgumentError } from "./errors.ts";
import { validateOptionKeys } from "./option_keys.ts";
import {
  describeValue,
  MAX_BYTE_LENGTH,
  validateByteLength,
  validateFlag,
} from "./validate.ts";

/** What a {@linkcode LeakDetector} knows about a watched handle. */
export interface LeakReport {
  /** A label given when the handle was watched, such as `DataPtr(cpu:0, ...)`. */
  label: string;
  /** Bytes the handle owned, when known. */
  byteLength: number;
  /** `Date.now()` when the handle was watched. */
  createdAt: number;
  /** Stack where the handle was watched, when `captureStack` is on. */
  stack?: string;
}

/** Options of {@linkcode LeakDetector}. */
export interface LeakDetectorOptions {
  /**
   * Called once per leaked handle, some time after it was collected.
   *
   * @default {undefined} (leaks are only collected in `leaks`)
   */
  onLeak?: (report: LeakReport) => void;
  /**
   * Record a stack trace for every watched handle (slow; for debugging).
   *
   * @default {false}
   */
  captureStack?: boolean;
}

/**
 * Watches owning handles with a `FinalizationRegistry`. A handle that is
 * collected while still watched was dropped without release: the detector
 * reports it. Call {@linkcode LeakDetector.forget} when the handle is
 * released. Opt-in: allocators take a detector as an option.
 *
 * @example
 * ```ts
 * import { LeakDetector } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * const detector = new LeakDetector();
 * const handle = {};
 * detector.watch(handle, { label: "tensor", byteLength: 64 });
 * assert.equal(detector.watching, 1);
 * detector.forget(handle); // released properly
 * assert.equal(detector.watching, 0);
 * ```
 */
export class LeakDetector {
  #registry: FinalizationRegistry<LeakReport>;
  #watching = 0;
  #leaks: LeakReport[] = [];
  #leakedBytes = 0;
  #captureStack: boolean;

  /**
   * Creates a detector.
   *
   * @param options Leak callback and stack capture.
   */
  constructor(options: LeakDetectorOptions = {}) {
    if (typeof options !== "object" || options === null) {
      throw new InvalidArgumentError(
        `Cannot create a LeakDetector: options must be an object, received ${
          describeValue(options)
        }`,
        { name: "options", value: options, limit: "LeakDetectorOptions" },
      );
    }
    validateOptionKeys(options, ["onLeak", "captureStack"], "LeakDetector");
    const onLeak = options.onLeak;
    if (onLeak !== undefined && typeof onLeak !== "function") {
      throw new InvalidArgumentError(
        `Cannot create a LeakDetector: onLeak must be a function, received ${
          describeValue(onLeak)
        }`,
        { name: "onLeak", value: onLeak, limit: "function" },
      );
    }
    this.#captureStack = validateFlag(
      options.captureStack,
      "captureStack",
      false,
    );
    this.#registry = new FinalizationRegistry((report) => {
      this.#watching--;
      Object.freeze(report); // shared by `leaks` and onLeak: read-only
      this.#leaks.push(report);
      this.#leakedBytes += report.byteLength;
      onLeak?.(report);
    });
  }

  /** Number of handles watched and neither forgotten nor collected. */
  get watching(): number {
    return this.#watching;
  }

  /**
   * Reports of every leak seen so far, oldest first: a copy, taken at each
   * read (changing it changes nothing here).
   */
  get leaks(): readonly LeakReport[] {
    return this.#leaks.slice();
  }

  /** Sum of `byteLength` over every leak seen so far. */
  get leakedBytes(): number {
    return this.#leakedBytes;
  }

  /**
   * Starts watching a handle. Watching the same handle twice is ignored.
   *
   * @param handle The owning handle.
   * @param info A label and the bytes it owns.
   */
  watch(handle: object, info: { label: string; byteLength?: number }): void {
    _requireHandle(handle, "watch");
    if (typeof info !== "object" || info === null) {
      throw new InvalidArgumentError(
        `Cannot watch a handle: info must be an object, received ${
          describeValue(info)
        }`,
        { name: "info", value: info, limit: "{ label, byteLength? }" },
      );
    }
    const label = info.label;
    if (typeof label !== "string") {
      throw new InvalidArgumentError(
        `Cannot watch a handle: info.label must be a string, received ${
          describeValue(label)
        }`,
        { name: "label", value: label, limit: "string" },
      );
    }
    const byteLength = info.byteLength === undefined
      ? 0
      : validateByteLength(info.byteLength, MAX_BYTE_LENGTH, "byteLength");
    const report: LeakReport = {
      label,
      byteLength,
      createdAt: Date.now(),
    };
    if (this.#captureStack) {
      report.stack = new Error().stack?.split("\n").slice(2).join("\n");
    }
    // Unregister first so a second watch replaces the first.
    if (this.#registry.unregister(handle)) this.#watching--;
    this.#registry.register(handle, report, handle);
    this.#watching++;
  }

  /**
   * Stops watching a handle, because it was released.
   *
   * @param handle The handle given to `watch`.
   * @returns `true` when the handle was being watched.
   */
  forget(handle: object): boolean {
    _requireHandle(handle, "forget");
    const removed = this.#registry.unregister(handle);
    if (removed) this.#watching--;
    return removed;
  }
}

function _requireHandle(handle: unknown, what: string): void {
  if (
    (typeof handle !== "object" && typeof handle !== "function") ||
    handle === null
  ) {
    throw new InvalidArgumentError(
      `Cannot ${what} a handle: it must be an object, received ${
        describeValue(handle)
      }`,
      { name: "handle", value: handle, limit: "object" },
    );
  }
}
