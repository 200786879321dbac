import { describeValue, InvalidArgumentError, type Stream } from "@allot/core";

/**
 * The id of each stream object an allocator took, made read-only then. A
 * stream's id must be stable (core's `Stream`): the pools are keyed by it,
 * and the allocator reads it again on later calls and when blocks are freed.
 */
const _streamIds = new WeakMap<object, number>();
/**
 * The same id, also kept on the stream object (non-enumerable, read-only)
 * where it can be added: read there, the check of a stream taken before is
 * one property load (the WeakMap lookup cost about 20-30 ns a call).
 */
const _LOCKED: unique symbol = Symbol("allot.streamId");

/**
 * Throws {@linkcode InvalidArgumentError} unless `stream` is a stream: an
 * object with a safe-integer `id` and a `fence()` method, whose `id` is
 * stable. The first time an allocator takes the object, its `id` must be a
 * data property (own or inherited; a getter may answer differently on each
 * read, and the allocator reads it more than once), and it is made
 * read-only on the object (an assignment then throws a `TypeError` in
 * strict code), so it cannot change while blocks use it. A later call whose
 * id differs from the first is refused all the same. Refused calls change
 * nothing. Not detected: a `Proxy` whose traps lie.
 *
 * @param stream The value to check.
 * @returns The stream.
 */
export function checkStream(stream: unknown): Stream {
  if (typeof stream === "object" && stream !== null) {
    const s = stream as Stream;
    const id = s.id; // read once per call
    const locked = (s as { [_LOCKED]?: number })[_LOCKED];
    if (
      locked === id && locked !== undefined && typeof s.fence === "function"
    ) {
      return s;
    }
    const seen = _streamIds.get(s);
    if (seen === id && seen !== undefined && typeof s.fence === "function") {
      return s;
    }
    if (Number.isSafeInteger(id) && typeof s.fence === "function") {
      if (seen !== undefined) {
        throw new InvalidArgumentError(
          `Invalid stream: its id must be stable, but it was ${seen} when first used and is ${id} now`,
          { name: "stream.id", value: id, limit: seen },
        );
      }
      if (!_lockId(s, id)) {
        throw new InvalidArgumentError(
          `Invalid stream: its id must be a data property that can be made read-only, not a getter (a getter may answer differently on each read), received a stream whose id read ${id}`,
          { name: "stream.id", value: id, limit: "a data property" },
        );
      }
      _streamIds.set(s, id);
      try {
        Object.defineProperty(s, _LOCKED, { value: id });
      } catch {
        // not extensible: the WeakMap alone serves it
      }
      return s;
    }
  }
  throw new InvalidArgumentError(
    `Invalid stream: must have an integer id and a fence() method, received ${
      describeValue(stream)
    }`,
    { name: "stream", value: stream },
  );
}

/**
 * Makes `s.id` (a data property of `s` or of a prototype, of value `id`) a
 * read-only own property of `s`; `false` for a getter, or when it cannot.
 */
function _lockId(s: object, id: number): boolean {
  let own = true;
  for (let o: object | null = s; o !== null; o = Object.getPrototypeOf(o)) {
    const d = Object.getOwnPropertyDescriptor(o, "id");
    if (d === undefined) {
      own = false;
      continue;
    }
    if (!("value" in d) || d.value !== id) return false;
    if (!own && !Object.isExtensible(s)) {
      // No own id can be added: stable only if the prototype's cannot change.
      return d.writable === false && d.configurable === false;
    }
    try {
      Object.defineProperty(s, "id", {
        value: id,
        writable: false,
        configurable: false,
      });
    } catch {
      return false;
    }
    return Object.getOwnPropertyDescriptor(s, "id")?.writable === false;
  }
  return false;
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
