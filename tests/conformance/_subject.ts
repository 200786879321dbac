/**
 * The contract's vocabulary: the verbs, the {@linkcode Subject} an adapter
 * makes of one allocator, the hostile values, and the typed-error checks.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  AllotError,
  describeValue,
  InvalidArgumentError,
  OutOfMemoryError,
} from "@allot/core";

/** The verbs every allocator of allot should answer to (issue #15, item 1). */
export const VERBS = [
  "allocate",
  "tryAllocate",
  "free",
  "recordStream",
  "synchronize",
  "emptyCache",
  "snapshot",
  "resetPeakStats",
  "resetAccumulatedStats",
  "validate",
  "stats",
  "memorySummary",
] as const;

/** One verb of {@linkcode VERBS}. */
export type Verb = typeof VERBS[number];

/** Why `recordStream` does not apply: the allocator has no streams. */
export const NO_STREAMS =
  "no streams: nothing else uses its memory asynchronously";
/** Why `synchronize` does not apply: frees take effect at once. */
export const NO_FENCES = "no fences: a free takes effect at once";
/** Why `free` does not apply: the handle frees itself. */
export const SELF_FREEING =
  "the handle frees itself (`release()`, `using`), once";
/** Why `emptyCache` does not apply: nothing is cached. */
export const NOTHING_CACHED =
  "nothing is cached: freed memory is the allocator's own at once";
/** Why `snapshot` does not apply: no segments of its own to picture. */
export const NO_LAYOUT =
  "no segments of its own to picture: `stats()` counts everything";
/** Why `recordStream` does not apply on WebGPU. */
export const ONE_QUEUE =
  "one queue (WebGPU): the allocator orders every free on it";

/** A byte figure: the shared `StatValues` record of `@allot/core`. */
export interface Figures {
  current: number;
  peak: number;
  allocated: number;
  freed: number;
}

/** One allocator seen through the contract. */
export interface Subject<H = unknown> {
  /** The public object whose verbs are audited. */
  readonly target: object;
  /** Verbs of {@linkcode VERBS} the target does not have under that name. */
  readonly knownGaps: readonly Verb[];
  /**
   * Verbs of {@linkcode VERBS} that do not apply to this allocator, each
   * with the one-line reason (`recordStream` where there are no streams, `free`
   * where the handle frees itself): absent by design, not a gap.
   */
  readonly notApplicable?: Readonly<Partial<Record<Verb, string>>>;
  /**
   * Why the bytes-in-use figure of `stats()` lacks `peak`, `allocated` or
   * `freed` (an allocator whose `stats()` is not yet the full record).
   */
  readonly partialStats?: string;
  /** Throws when out of memory (an `OutOfMemoryError`-family error). */
  allocate(byteLength: number): H;
  /** `undefined` (or `null`) where {@linkcode allocate} throws out of memory. */
  tryAllocate(byteLength: number): H | undefined | null;
  /**
   * Gives a live handle back; throws a typed error for a stale one, unless
   * {@linkcode Subject.releaseIsIdempotent}.
   */
  free(handle: H): void;
  /** The native free verb called with any value (default: `free`). */
  freeRaw?(value: unknown): void;
  /**
   * The allocator has no `free` verb: a handle releases itself, once, and a
   * second release does nothing (a `DataPtr`, as `using` needs).
   */
  readonly releaseIsIdempotent?: boolean;
  /** The bytes the handle counts for in `bytesInUse().current`. */
  countedBytes(handle: H, requested: number): number;
  /** The handle's bytes, where the CPU can see them. */
  bytes?(handle: H): Uint8Array;
  /**
   * The "bytes in use" figure of the allocator's `stats()`; `current` alone
   * where the allocator keeps no peak or totals (a gap).
   */
  bytesInUse(): Partial<Figures> & { current: number };
  /** The count of live allocations, where the allocator keeps one. */
  allocations?(): Figures;
  /** Bytes the allocator holds from its source, where it owns segments. */
  reservedBytes?(): number;
  /** The allocator's `memorySummary()` (or nearest equivalent). */
  summary?(): string;
  validate(): void;
  emptyCache?(): void;
  resetPeakStats?(): void;
  /** Zeroes `allocated` and `freed` (and counters), keeps `current`. */
  resetAccumulatedStats?(): void;
  /**
   * Operations of the allocator's own that random sequences mix in (a
   * planned pool's `endStep`, a `trim`): each must keep the contract.
   */
  readonly extraOps?: readonly { name: string; run(): unknown }[];
  /** Everything observable, comparable with `deepEqual` (stats, snapshot). */
  state(): unknown;
  /** A request of more bytes than this always fails out of memory. */
  readonly capacityBytes: number;
  /** Random requests stay at or under this. */
  readonly maxRequestBytes: number;
  /** Other numeric parameters of the allocate verb, for hostile values. */
  readonly extraParameters?: readonly {
    name: string;
    /** Optional: `undefined` means "not given". */
    optional?: boolean;
    /** Values of the hostile list this parameter takes (a ratio: 1.5). */
    accepts?: readonly unknown[];
    call(value: unknown): unknown;
  }[];
  /**
   * A handle this allocator never gave out (another instance's, or an
   * offset inside a live block); absent where a handle frees itself.
   */
  foreign?(): H;
  /**
   * Values of the not-a-handle list that are handles of the free verb's kind
   * here (a negative number is a large block's address in a buddy
   * allocator): refused as handles not held, with a `DoubleFreeError`.
   */
  readonly handleKind?: readonly unknown[];
  /**
   * Frees wait on a fence: a freed block stays counted in use until
   * {@linkcode Subject.settle} (after-fence reuse), so between a free and the
   * next settle the figures may exceed the live sum, never fall below it.
   */
  readonly pendingFrees?: boolean;
  /** Waits for pending frees (GPU fences); optional. */
  settle?(): Promise<void>;
  /** Ends the subject (and the foreign instance). */
  close(): void;
}

/**
 * `tryAllocate` for an allocator that has none: its `allocate`, with an
 * out-of-memory error turned into `undefined` (a bad request still throws).
 */
export function orUndefined<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch (e) {
    if (e instanceof OutOfMemoryError) return undefined;
    throw e;
  }
}

/** How many fast-check runs a model property makes (nightly: more). */
export function runs(ci = 60): number {
  const env = Deno.env.get("ALLOT_FC_RUNS");
  return env === undefined ? ci : Math.max(ci, Number(env) / 20);
}

/**
 * Values that no byte-length parameter may take. `-0` is not among them: the
 * library-wide rule reads `-0` as `0`.
 */
export function hostileNumbers(): { label: string; value: unknown }[] {
  let reads = 0;
  const flipping = {
    get valueOf() {
      reads++;
      return () => (reads === 1 ? 64 : -1);
    },
  };
  return [
    { label: "NaN", value: NaN },
    { label: "Infinity", value: Infinity },
    { label: "-Infinity", value: -Infinity },
    { label: "-1", value: -1 },
    { label: "1.5", value: 1.5 },
    { label: "2**53", value: 2 ** 53 },
    { label: "2**64", value: 2 ** 64 },
    { label: '"64"', value: "64" },
    { label: "{valueOf}", value: { valueOf: () => 64 } },
    { label: "a valueOf that changes", value: flipping },
    { label: "64n", value: 64n },
    { label: "null", value: null },
    { label: "undefined", value: undefined },
  ];
}

/** The error family a refused argument must throw. */
export function assertInvalidArgument(
  error: unknown,
  value: unknown,
  where: string,
): void {
  if (!(error instanceof InvalidArgumentError)) {
    assert.fail(
      `${where}: expected an InvalidArgumentError, got ${
        error instanceof Error ? `${error.name}: ${error.message}` : error
      }`,
    );
  }
  assert.ok(
    error.message.includes(describeValue(value)) ||
      (typeof value === "number" && error.message.includes(String(value))),
    `${where}: the message names the value ${
      describeValue(value)
    }: ${error.message}`,
  );
  assert.ok(
    error.limit !== undefined,
    `${where}: the error states a limit: ${error.message}`,
  );
}

function errorText(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** Asserts `fn` throws a typed allot error of `family`, and returns it. */
export function throwsTyped(
  fn: () => unknown,
  family: (abstract new (...args: never[]) => Error)[],
  where: string,
): Error {
  try {
    fn();
  } catch (e) {
    assert.ok(
      e instanceof AllotError && family.some((f) => e instanceof f),
      `${where}: expected ${family.map((f) => f.name).join(" or ")}, got ${
        errorText(e)
      }`,
    );
    return e;
  }
  assert.fail(`${where}: did not throw`);
}
