/**
 * Internal: {@linkcode _resolveWatermarkOptions}, the checked and
 * defaulted form of {@linkcode WatermarkAllocatorOptions}, and the checks
 * of the watermark ratios.
 *
 * @module
 */

import {
  describeValue,
  hostBuffer,
  InvalidArgumentError,
  isHostMemory,
  isPowerOfTwo,
  optionOr,
  type SegmentSource,
  type TraceRecorderOptions,
  validateAlignment,
  validateFlag,
  validateInteger,
  validateObject,
} from "@allot/core";
import { DebugVerbosity } from "./debug_verbosity.ts";
import type {
  HostViewFunction,
  WatermarkAllocatorOptions,
} from "./watermark_options.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
/** The largest high watermark ratio, as in MPS: twice the recommended size. */
const MAX_RATIO = 2;

/** Every option, checked, with its default applied. */
export interface _WatermarkConfig<M> {
  alignment: number;
  maxSegment: number;
  unifiedMemory: boolean;
  recommended: number;
  highRatio: number;
  lowRatio: number;
  maxSmall: number;
  minLarge: number;
  smallHeap: number;
  largeHeap: number;
  xlargeHeap: number;
  minSmallHeap: number;
  minLargeHeap: number;
  minXlargeHeap: number;
  roundLarge: number;
  maxSlack: number;
  maxScalar: number;
  driverFn: (() => number) | undefined;
  verbosity: number;
  logger: (line: string) => void;
  hostView: HostViewFunction<M>;
  strict: boolean;
  recordHistory: TraceRecorderOptions | false;
}

function defaultHostView(
  memory: unknown,
  range: { byteOffset: number; byteLength: number },
): Uint8Array | undefined {
  if (isHostMemory(memory)) {
    return new Uint8Array(
      hostBuffer(memory),
      range.byteOffset,
      range.byteLength,
    );
  }
  if (typeof memory === "object" && memory !== null && "bytes" in memory) {
    const bytes = (memory as { bytes: unknown }).bytes;
    if (bytes instanceof Uint8Array) {
      return bytes.subarray(
        range.byteOffset,
        range.byteOffset + range.byteLength,
      );
    }
  }
  return undefined;
}

/**
 * 1 GiB, as in MPS, but at most a sixteenth of the recommended working set
 * (rounded down to a power of two, at least the large heap): one
 * extra-large heap pinned by a few live buffers must not hold a large share
 * of a small device.
 */
function defaultXlargeHeap(recommended: number, largeHeap: number): number {
  const GiB = 1024 * MiB;
  if (!Number.isFinite(recommended) || recommended >= 16 * GiB) return GiB;
  const share = 2 ** Math.floor(Math.log2(recommended / 16));
  return Math.max(largeHeap, Math.min(GiB, share));
}

function positiveOption(
  options: Record<string, unknown>,
  name: string,
  fallback: number,
): number {
  const value = optionOr(options[name], fallback);
  if (
    typeof value !== "number" || !Number.isSafeInteger(value) || value < 1
  ) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a positive integer, received ${
        describeValue(value)
      }`,
      { name, value, limit: 1 },
    );
  }
  return value;
}

/**
 * The smallest heap of a class: a positive integer of at most the class's
 * heap size (`capName`, `cap`).
 */
function minimumOption(
  options: Record<string, unknown>,
  name: string,
  capName: string,
  cap: number,
  fallback: number,
): number {
  const value = positiveOption(options, name, fallback);
  if (value > cap) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be at most ${capName} (${cap}), received ${value}`,
      { name, value, limit: cap },
    );
  }
  return value;
}

/** An optional function option: its default for `undefined`, else checked. */
function optionalFunction<F>(
  value: F | undefined,
  name: string,
  fallback: F,
): F {
  if (value === undefined) return fallback;
  if (typeof value !== "function") {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a function, received ${describeValue(value)}`,
      { name, value, limit: "function" },
    );
  }
  return value;
}

/** Checks a high watermark ratio against the low one. */
export function _checkHighRatio(ratio: number, low: number): void {
  if (
    typeof ratio !== "number" || !(ratio >= 0 && ratio <= MAX_RATIO)
  ) {
    throw new InvalidArgumentError(
      `Invalid high watermark ratio: must be in [0, ${MAX_RATIO}], received ${
        describeValue(ratio)
      }`,
      { name: "highWatermarkRatio", value: ratio, limit: [0, MAX_RATIO] },
    );
  }
  if (ratio !== 0 && low > ratio) {
    throw new InvalidArgumentError(
      `Invalid high watermark ratio: must be at least the low watermark ratio ${low}, received ${ratio}`,
      { name: "highWatermarkRatio", value: ratio, limit: low },
    );
  }
}

/** Checks a low watermark ratio against the high one. */
export function _checkLowRatio(ratio: number, high: number): void {
  const upper = high === 0 ? MAX_RATIO : high;
  if (typeof ratio !== "number" || !(ratio >= 0 && ratio <= upper)) {
    throw new InvalidArgumentError(
      `Invalid low watermark ratio: must be in [0, ${upper}] (at most the high watermark ratio), received ${
        describeValue(ratio)
      }`,
      { name: "lowWatermarkRatio", value: ratio, limit: [0, upper] },
    );
  }
}

/**
 * Checks `options` and applies the defaults.
 *
 * @returns The configuration.
 * @throws {InvalidArgumentError} For a ratio out of range, a low ratio
 * above the high one, or a size that is not a positive integer.
 */
export function _resolveWatermarkOptions<M>(
  source: SegmentSource<M>,
  options: WatermarkAllocatorOptions<M>,
): _WatermarkConfig<M> {
  validateObject(source, "source");
  validateObject(options, "options");
  // Read once: a source whose alignment is not a power of two (NaN, 0, 3)
  // would fail every later request with a NaN size.
  const alignment = validateAlignment(
    source.alignment,
    2 ** 30,
    "source.alignment",
  );
  const maxSegment = source.maxSegmentByteLength;
  if (!Number.isSafeInteger(maxSegment) || maxSegment < alignment) {
    throw new InvalidArgumentError(
      `Invalid source.maxSegmentByteLength: must be an integer of at least the alignment ${alignment}, received ${
        describeValue(maxSegment)
      }`,
      {
        name: "source.maxSegmentByteLength",
        value: maxSegment,
        limit: alignment,
      },
    );
  }
  const unifiedMemory = validateFlag(
    options.unifiedMemory,
    "unifiedMemory",
    true,
  );
  const o = options as Record<string, unknown>;
  const recommended = optionOr(
    options.recommendedMaxBytes,
    source.capacityBytes,
  );
  if (
    typeof recommended !== "number" || !(recommended > 0) ||
    (recommended !== Infinity && !Number.isSafeInteger(recommended))
  ) {
    throw new InvalidArgumentError(
      `Invalid recommendedMaxBytes: must be a positive integer or Infinity, received ${
        describeValue(recommended)
      }`,
      { name: "recommendedMaxBytes", value: recommended, limit: 1 },
    );
  }
  const maxSmall = positiveOption(o, "maxSmallByteLength", MiB);
  const minLarge = positiveOption(o, "minLargeByteLength", 10 * MiB);
  const smallHeap = positiveOption(o, "smallHeapByteLength", 8 * MiB);
  const largeHeap = positiveOption(o, "largeHeapByteLength", 32 * MiB);
  const xlargeHeap = positiveOption(
    o,
    "xlargeHeapByteLength",
    defaultXlargeHeap(recommended, largeHeap),
  );
  const minSmallHeap = minimumOption(
    o,
    "minSmallHeapByteLength",
    "smallHeapByteLength",
    smallHeap,
    Math.min(smallHeap, 128 * KiB),
  );
  const minLargeHeap = minimumOption(
    o,
    "minLargeHeapByteLength",
    "largeHeapByteLength",
    largeHeap,
    Math.min(largeHeap, 2 * MiB),
  );
  const minXlargeHeap = minimumOption(
    o,
    "minXlargeHeapByteLength",
    "xlargeHeapByteLength",
    xlargeHeap,
    Math.min(xlargeHeap, largeHeap),
  );
  const roundLarge = positiveOption(o, "largeRoundByteLength", 2 * MiB);
  if (!isPowerOfTwo(roundLarge)) {
    // requests are rounded with alignUp(): 3 was accepted here and the first
    // large request under memory pressure failed with alignUp's message
    throw new InvalidArgumentError(
      `Invalid largeRoundByteLength: must be a power of two, received ${roundLarge}`,
      {
        name: "largeRoundByteLength",
        value: roundLarge,
        limit: "a power of two",
      },
    );
  }
  const maxSlack = positiveOption(o, "maxSlackByteLength", largeHeap);
  const maxScalar = positiveOption(o, "maxScalarByteLength", 8);
  if (smallHeap < maxSmall) {
    throw new InvalidArgumentError(
      `Invalid smallHeapByteLength: must be at least maxSmallByteLength (${maxSmall}), received ${smallHeap}`,
      {
        name: "smallHeapByteLength",
        value: smallHeap,
        limit: maxSmall,
      },
    );
  }
  if (largeHeap < minLarge) {
    throw new InvalidArgumentError(
      `Invalid largeHeapByteLength: must be at least minLargeByteLength (${minLarge}), received ${largeHeap}`,
      {
        name: "largeHeapByteLength",
        value: largeHeap,
        limit: minLarge,
      },
    );
  }
  // called as a function: 5 was accepted and silently ignored
  const driverFn = optionalFunction(
    options.driverAllocatedBytes,
    "driverAllocatedBytes",
    undefined,
  );
  // a mask of DebugVerbosity's flags (bits not yet named are ignored)
  const verbosity = validateInteger(
    optionOr(options.debugVerbosity, DebugVerbosity.silent),
    0,
    0xffffffff,
    "debugVerbosity",
  );
  const logger = optionalFunction(
    options.logger,
    "logger",
    (line: string) => console.error(line),
  );
  const hostView = optionalFunction(
    options.hostView,
    "hostView",
    defaultHostView as HostViewFunction<M>,
  );
  const strict = validateFlag(options.strict, "strict", false);
  const high = optionOr(options.highWatermarkRatio, 1.7);
  _checkHighRatio(high, 0);
  const defaultLow = unifiedMemory ? 1.4 : 1.0;
  const low = optionOr(
    options.lowWatermarkRatio,
    high === 0 ? defaultLow : Math.min(defaultLow, high),
  );
  _checkLowRatio(low, high);
  const history = optionOr(options.recordHistory, false);
  if (typeof history !== "boolean") validateObject(history, "recordHistory");
  return {
    alignment,
    maxSegment,
    unifiedMemory,
    recommended,
    highRatio: high,
    lowRatio: low,
    maxSmall,
    minLarge,
    smallHeap,
    largeHeap,
    xlargeHeap,
    minSmallHeap,
    minLargeHeap,
    minXlargeHeap,
    roundLarge,
    maxSlack,
    maxScalar,
    driverFn,
    verbosity,
    logger,
    hostView,
    strict,
    recordHistory: history === true ? {} : history,
  };
}
