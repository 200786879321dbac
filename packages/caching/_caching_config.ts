/**
 * Internal: {@linkcode _resolveCachingOptions}, the checked and defaulted
 * form of {@linkcode CachingAllocatorOptions} that the facade and the policy
 * read.
 *
 * @module
 */

import {
  describeValue,
  InvalidArgumentError,
  type LeakDetector,
  optionOr,
  type SegmentSource,
  type TraceRecorderOptions,
  validateAlignment,
  validateByteLength,
  validateFlag,
  validateObject,
} from "@allot/core";
import type { CachingAllocatorOptions } from "./caching_options.ts";
import { type _GroupCore, _groupCore } from "./_caching_group.ts";
import {
  checkLeakDetector,
  checkOptionalString,
  checkSource,
} from "./_check.ts";
import { expandRoundupPower2Divisions } from "./round_size.ts";

const MiB = 1048576;

/**
 * The default block granule: WebGPU's storage offset alignment, the finest a
 * block carved from a shared GPU buffer can have (PyTorch's 512 rounds small
 * tensors up to several times their size; see `minBlockByteLength`).
 */
const DEFAULT_BLOCK_GRANULE = 256;

/** Every option, checked, with its default applied. */
export interface _CachingConfig {
  label: string;
  /** Block granule (raised to the source's alignment). */
  granule: number;
  smallRequestMax: number;
  smallSegment: number;
  largeSegment: number;
  ownSegmentMin: number;
  largeRound: number;
  /** Adaptive segment sizes: share of reserved bytes; 0 for fixed sizes. */
  segmentGrowth: number;
  /** Smallest adaptive segment. */
  minSegment: number;
  /** Release whole free segments on a miss above this held/active ratio. */
  releaseRatio: number;
  maxSplit: number;
  nonSplitRounding: number;
  /** Largest block or segment: the source's limit, in whole granules. */
  maxBlock: number;
  /** Power-of-two divisions, or `undefined` when none divide. */
  divisions: number[] | undefined;
  fraction: number;
  gcThreshold: number;
  expandable: boolean;
  strict: boolean;
  leakDetector: LeakDetector | undefined;
  recordHistory: TraceRecorderOptions | false;
  /** The group the allocator joins (see `CachingGroup`). */
  group: _GroupCore | undefined;
}

function positive(
  value: number | undefined,
  fallback: number,
  name: string,
): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a positive integer, received ${
        describeValue(value)
      }`,
      { name, value, limit: Number.MAX_SAFE_INTEGER },
    );
  }
  return value;
}

function checkMultiple(value: number, granule: number, name: string): void {
  if (value % granule !== 0) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a multiple of the block granule ${granule}, received ${
        describeValue(value)
      }`,
      { name, value, limit: granule },
    );
  }
}

/**
 * Checks a fraction: `memoryFraction` in (0, 1], others in [0, 1).
 *
 * @returns The value.
 */
export function _checkFraction(
  value: number,
  name: string,
  max: number,
): number {
  const ok = typeof value === "number" && value >= 0 &&
    (max === 1 ? value <= 1 : value < 1) &&
    (name !== "memoryFraction" || value > 0);
  if (!ok) {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a number in ${
        name === "memoryFraction" ? "(0, 1]" : "[0, 1)"
      }, received ${describeValue(value)}`,
      { name, value, limit: 1 },
    );
  }
  return value;
}

/**
 * Checks `options` against `source` and applies the defaults.
 *
 * @returns The configuration.
 * @throws {InvalidArgumentError} For an option out of range.
 */
export function _resolveCachingOptions<M>(
  source: SegmentSource<M>,
  options: CachingAllocatorOptions,
): _CachingConfig {
  validateObject(source, "source");
  validateObject(options, "options");
  const requested = validateAlignment(
    optionOr(options.minBlockByteLength, DEFAULT_BLOCK_GRANULE),
    2 ** 30,
    "minBlockByteLength",
  );
  const granule = Math.max(
    requested,
    validateAlignment(source.alignment, 2 ** 30, "source.alignment"),
  );
  const maxSegment = checkSource(source, granule);
  checkOptionalString(options.label, "label");
  checkLeakDetector(options.leakDetector);
  const smallMax = positive(
    options.smallRequestMaxByteLength,
    256 * 1024,
    "smallRequestMaxByteLength",
  );
  const smallSegment = positive(
    options.smallSegmentByteLength,
    2 * MiB,
    "smallSegmentByteLength",
  );
  const largeSegment = positive(
    options.largeSegmentByteLength,
    20 * MiB,
    "largeSegmentByteLength",
  );
  const ownMin = positive(
    options.ownSegmentMinByteLength,
    10 * MiB,
    "ownSegmentMinByteLength",
  );
  const largeRound = positive(
    options.largeRoundByteLength,
    2 * MiB,
    "largeRoundByteLength",
  );
  const growth = optionOr(options.segmentGrowthFraction, 1 / 128);
  if (typeof growth !== "number" || !(growth >= 0 && growth <= 1)) {
    throw new InvalidArgumentError(
      `Invalid segmentGrowthFraction: must be a number in [0, 1], received ${
        describeValue(growth)
      }`,
      { name: "segmentGrowthFraction", value: growth, limit: 1 },
    );
  }
  const minSegment = positive(
    options.minSegmentByteLength,
    4096,
    "minSegmentByteLength",
  );
  const releaseRatio = optionOr(options.releaseCachedAboveRatio, 1.05);
  if (typeof releaseRatio !== "number" || !(releaseRatio >= 1)) {
    throw new InvalidArgumentError(
      `Invalid releaseCachedAboveRatio: must be a number of at least 1, or Infinity, received ${
        describeValue(releaseRatio)
      }`,
      { name: "releaseCachedAboveRatio", value: releaseRatio, limit: 1 },
    );
  }
  checkMultiple(smallSegment, granule, "smallSegmentByteLength");
  checkMultiple(largeSegment, granule, "largeSegmentByteLength");
  checkMultiple(largeRound, granule, "largeRoundByteLength");
  if (smallSegment < smallMax) {
    throw new InvalidArgumentError(
      `Invalid smallSegmentByteLength: must be at least smallRequestMaxByteLength ${smallMax}, received ${smallSegment}`,
      {
        name: "smallSegmentByteLength",
        value: smallSegment,
        limit: smallMax,
      },
    );
  }
  if (ownMin > largeSegment || ownMin <= smallMax) {
    throw new InvalidArgumentError(
      `Invalid ownSegmentMinByteLength: must be in (${smallMax}, ${largeSegment}], received ${
        describeValue(ownMin)
      }`,
      {
        name: "ownSegmentMinByteLength",
        value: ownMin,
        limit: [smallMax, largeSegment],
      },
    );
  }
  const maxSplit = optionOr(
    options.maxSplitByteLength,
    optionOr(options.maxSplitSize, Infinity),
  );
  if (
    !(maxSplit === Infinity || Number.isSafeInteger(maxSplit)) ||
    maxSplit < largeSegment
  ) {
    throw new InvalidArgumentError(
      `Invalid maxSplitByteLength: must be an integer of at least largeSegmentByteLength ${largeSegment}, or Infinity, received ${
        describeValue(maxSplit)
      }`,
      { name: "maxSplitByteLength", value: maxSplit, limit: largeSegment },
    );
  }
  const nonSplit = optionOr(
    options.maxNonSplitRoundingByteLength,
    optionOr(options.maxNonSplitRoundingSize, 20 * MiB),
  );
  validateByteLength(
    nonSplit,
    Number.MAX_SAFE_INTEGER,
    "maxNonSplitRoundingByteLength",
  );
  const expanded = expandRoundupPower2Divisions(
    options.roundupPower2Divisions ?? 0,
  );
  const fraction = _checkFraction(
    optionOr(options.memoryFraction, 1),
    "memoryFraction",
    1,
  );
  const gcThreshold = _checkFraction(
    optionOr(options.garbageCollectionThreshold, 0),
    "garbageCollectionThreshold",
    0,
  );
  const history = optionOr(options.recordHistory, false);
  if (typeof history !== "boolean") validateObject(history, "recordHistory");
  const expandable = validateFlag(
    options.expandableSegments,
    "expandableSegments",
    false,
  );
  const strict = validateFlag(options.strict, "strict", false);
  const given = options.group; // read once
  const group = given === undefined ? undefined : _groupCore(given);
  if (given !== undefined && group === undefined) {
    throw new InvalidArgumentError(
      `Invalid group: must be a CachingGroup, received ${describeValue(given)}`,
      { name: "group", value: given, limit: "CachingGroup" },
    );
  }
  return {
    label: options.label ?? "CachingAllocator",
    granule,
    smallRequestMax: smallMax,
    smallSegment,
    largeSegment,
    ownSegmentMin: ownMin,
    largeRound,
    segmentGrowth: growth,
    minSegment: Math.ceil(minSegment / granule) * granule,
    // Expandable segments give free tails back themselves (at a full device
    // and emptyCache()); releasing their own segments early measured worse
    // (the churn trace at 1.1x capacity ran out of memory).
    releaseRatio: expandable ? Infinity : releaseRatio,
    maxSplit,
    nonSplitRounding: nonSplit,
    maxBlock: Math.floor(maxSegment / granule) * granule,
    divisions: expanded.some((d) => d > 1) ? expanded : undefined,
    fraction,
    gcThreshold,
    expandable: expandable && typeof source.tryResizeSegment === "function",
    strict,
    leakDetector: options.leakDetector,
    recordHistory: history === true ? {} : history,
    group,
  };
}
