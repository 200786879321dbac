import {
  describeValue,
  InvalidArgumentError,
  type Stream,
  validateSynchronizeOptions,
} from "@allot/core";

/**
 * Throws {@linkcode InvalidArgumentError} unless `stream` is a stream: an
 * object with a safe-integer `id` and a `fence()` method.
 *
 * @param stream The value to check.
 * @returns The stream.
 */
export function checkStream(stream: unknown): Stream {
  const s = stream as Stream;
  if (
    typeof stream !== "object" || stream === null ||
    !Number.isSafeInteger(s.id) || typeof s.fence !== "function"
  ) {
    throw new InvalidArgumentError(
      `Invalid stream: must have an integer id and a fence() method, received ${
        describeValue(stream)
      }`,
      { name: "stream", value: stream },
    );
  }
  return s;
}

/**
 * Throws {@linkcode InvalidArgumentError} unless `source` has what the
 * allocator reads: `maxSegmentByteLength` a safe integer of at least
 * `granule`, `capacityBytes` a non-negative safe integer or `Infinity`, and
 * `tryAllocateSegment()`/`freeSegment()` (and `tryResizeSegment()`, when
 * present) functions. Each is read once here.
 *
 * @param source The segment source (an object).
 * @param granule The block granule: the smallest segment.
 * @returns The `maxSegmentByteLength` read.
 */
export function checkSource(
  source: {
    maxSegmentByteLength: unknown;
    capacityBytes: unknown;
    tryAllocateSegment: unknown;
    freeSegment: unknown;
    tryResizeSegment?: unknown;
  },
  granule: number,
): number {
  const max = source.maxSegmentByteLength;
  if (!Number.isSafeInteger(max) || (max as number) < granule) {
    throw new InvalidArgumentError(
      `Invalid source.maxSegmentByteLength: must be an integer of at least the block granule ${granule}, received ${
        describeValue(max)
      }`,
      { name: "source.maxSegmentByteLength", value: max, limit: granule },
    );
  }
  const capacity = source.capacityBytes;
  if (
    capacity !== Infinity &&
    !(Number.isSafeInteger(capacity) && (capacity as number) >= 0)
  ) {
    throw new InvalidArgumentError(
      `Invalid source.capacityBytes: must be a non-negative integer of at most ${Number.MAX_SAFE_INTEGER}, or Infinity, received ${
        describeValue(capacity)
      }`,
      {
        name: "source.capacityBytes",
        value: capacity,
        limit: Number.MAX_SAFE_INTEGER,
      },
    );
  }
  for (const key of ["tryAllocateSegment", "freeSegment", "tryResizeSegment"]) {
    const fn = source[key as "freeSegment"];
    if (
      typeof fn !== "function" &&
      (key !== "tryResizeSegment" || fn !== undefined)
    ) {
      throw new InvalidArgumentError(
        `Invalid source.${key}: must be a function, received ${
          describeValue(fn)
        }`,
        { name: `source.${key}`, value: fn, limit: "function" },
      );
    }
  }
  return max as number;
}

/**
 * Throws {@linkcode InvalidArgumentError} unless `detector` is `undefined`
 * or has `watch()` and `forget()` methods (a core `LeakDetector`).
 *
 * @param detector The `leakDetector` option.
 */
export function checkLeakDetector(detector: unknown): void {
  if (detector === undefined) return;
  const d = detector as { watch?: unknown; forget?: unknown };
  if (
    typeof detector !== "object" || detector === null ||
    typeof d.watch !== "function" || typeof d.forget !== "function"
  ) {
    throw new InvalidArgumentError(
      `Invalid leakDetector: must have watch() and forget() methods (a LeakDetector), received ${
        describeValue(detector)
      }`,
      { name: "leakDetector", value: detector, limit: "LeakDetector" },
    );
  }
}

/**
 * Throws {@linkcode InvalidArgumentError} unless `value` is a string (or
 * `undefined`, the default).
 *
 * @param value The value.
 * @param name The option's name.
 */
export function checkOptionalString(value: unknown, name: string): void {
  if (value !== undefined && typeof value !== "string") {
    throw new InvalidArgumentError(
      `Invalid ${name}: must be a string, received ${describeValue(value)}`,
      { name, value, limit: "string" },
    );
  }
}

/**
 * Throws {@linkcode InvalidArgumentError} unless `signal` is `undefined` or
 * an `AbortSignal` (a brand check: a look-alike is refused).
 *
 * @param signal The value to check, read once by the caller.
 * @param action What the error message says could not be done.
 * @returns The signal, if any.
 */
export function checkSignal(
  signal: unknown,
  action: string,
): AbortSignal | undefined {
  if (signal === undefined) return undefined;
  try {
    return validateSynchronizeOptions({ signal });
  } catch {
    throw new InvalidArgumentError(
      `${action}: signal must be an AbortSignal, received ${
        describeValue(signal)
      }`,
      { name: "signal", value: signal, limit: "AbortSignal" },
    );
  }
}
