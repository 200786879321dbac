import { describeValue, InvalidArgumentError } from "@allot/core";
import { parseStack } from "./frame_kind.ts";
import {
  type Trace,
  TRACE_FORMAT,
  TRACE_VERSION,
  type TraceEvent,
} from "./trace_format.ts";

/** One history entry of an allot allocator (`@allot/caching`'s `TraceEntry` shape). */
export interface HistoryEntryLike {
  /** What happened: `alloc`, `free_requested`, `segment_alloc`, `segment_free` (others are skipped). */
  readonly action: string;
  /** Virtual address of the block or segment. */
  readonly address: number;
  /** Bytes of the block or segment. */
  readonly byteLength: number;
  /** Bytes the caller asked for. */
  readonly requestedByteLength?: number;
  /** Milliseconds since the allocator was made. */
  readonly timeMs: number;
  /** Stack text captured with the entry (V8's `Error.stack` format). */
  readonly stack?: string;
  /** The tag the caller set, where the allocator records one. */
  readonly tag?: string;
}

/** An allocator snapshot with history (`@allot/caching`'s `MemorySnapshot` shape). */
export interface SnapshotLike {
  /** The device, such as `webgpu:0`. */
  readonly device?: string;
  /** The allocator's label. */
  readonly allocator?: string;
  /** History entries, oldest first. */
  readonly history: readonly HistoryEntryLike[];
  /** Entries the history ring buffer dropped, where the allocator counts them. */
  readonly droppedEntries?: number;
  /** The same count under another name. */
  readonly dropped?: number;
}

/**
 * Converts an allot allocator's snapshot history into a trace: segments
 * become `create`/`destroy`, blocks `alloc`/`free` inside their segment (with
 * `buffer` and `offset`), stacks are parsed user-first, and a `dropped`
 * event says how many entries the ring buffer lost. Blocks whose allocation
 * or segment was dropped from the history are left out, so the result always
 * validates.
 *
 * @throws {InvalidArgumentError} When the snapshot has no history array, an
 * entry's address, byte length or requested length is not a non-negative
 * safe integer, its time is not a finite number, its tag or stack is not a
 * string, the dropped count is not a count, or `source` is not a string.
 *
 * @example
 * ```ts
 * import { CachingAllocator } from "@allot/caching";
 * import { MockSegmentSource } from "@allot/core";
 * import { fromAllocatorSnapshot, parseTrace, formatTrace } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const a = new CachingAllocator(new MockSegmentSource(), { recordHistory: true });
 * a.allocate(1000).release();
 * const trace = fromAllocatorSnapshot(a.snapshot());
 * assert.deepEqual(parseTrace(formatTrace(trace)).events.map((e) => e.op), ["create", "alloc", "free"]);
 * ```
 */
export function fromAllocatorSnapshot(
  snapshot: SnapshotLike,
  source?: string,
): Trace {
  // read once: the array checked is the array converted
  let history: unknown;
  try {
    if (snapshot !== null && typeof snapshot === "object") {
      history = snapshot.history;
    }
  } catch {
    history = undefined; // a snapshot that traps when read: refused below
  }
  if (!Array.isArray(history)) {
    throw new InvalidArgumentError(
      `Cannot convert a snapshot: it must have a history array, received ${
        describeValue(snapshot)
      }`,
      { name: "snapshot", value: snapshot, limit: "an allocator snapshot" },
    );
  }
  const events: TraceEvent[] = [];
  const segs: { id: number; address: number; size: number }[] = [];
  const blocks = new Map<number, number>();
  const stackIds = new Map<string, number>();
  let next = 0, last = 0;
  const dropped = snapshot.droppedEntries ?? snapshot.dropped ?? 0;
  if (!Number.isSafeInteger(dropped) || dropped < 0) {
    throw new InvalidArgumentError(
      `Cannot convert a snapshot: its dropped count must be a non-negative integer, received ${
        describeValue(dropped)
      }`,
      { name: "droppedEntries", value: dropped, limit: "a count" },
    );
  }
  if (source !== undefined && typeof source !== "string") {
    throw new InvalidArgumentError(
      `Cannot convert a snapshot: source must be a string, received ${
        describeValue(source)
      }`,
      { name: "source", value: source, limit: "a string" },
    );
  }
  if (dropped > 0) events.push({ t: 0, op: "dropped", count: dropped });
  const stackOf = (t: number, s: string | undefined): number | undefined => {
    if (!s) return undefined;
    let sid = stackIds.get(s);
    if (sid === undefined) {
      sid = stackIds.size;
      stackIds.set(s, sid);
      events.push({ t, op: "stack", sid, frames: parseStack(s) });
    }
    return sid;
  };
  const n = history.length;
  for (let i = 0; i < n; i++) {
    const h = _checkEntry(history, i);
    const t = Math.max(last, Math.round(h.timeMs * 1000) / 1000);
    last = t;
    const extra = (s: number | undefined) => ({
      ...(h.tag !== undefined ? { tag: String(h.tag) } : {}),
      ...(s !== undefined ? { s } : {}),
    });
    switch (h.action) {
      case "segment_alloc": {
        const id = next++;
        segs.push({ id, address: h.address, size: h.byteLength });
        events.push({
          t,
          op: "create",
          id,
          size: h.byteLength,
          usage: 0,
          ...extra(stackOf(t, h.stack)),
        });
        break;
      }
      case "segment_free": {
        const k = segs.findIndex((s) => s.address === h.address);
        if (k < 0) break;
        events.push({ t, op: "destroy", id: segs[k].id, ...extra(undefined) });
        segs.splice(k, 1);
        break;
      }
      case "alloc": {
        if (blocks.has(h.address)) break;
        const id = next++;
        blocks.set(h.address, id);
        const seg = segs.find((s) =>
          h.address >= s.address && h.address < s.address + s.size
        );
        events.push({
          t,
          op: "alloc",
          id,
          size: h.byteLength,
          ...(seg ? { buffer: seg.id, offset: h.address - seg.address } : {}),
          ...extra(stackOf(t, h.stack)),
        });
        break;
      }
      case "free_requested": {
        const id = blocks.get(h.address);
        if (id === undefined) break;
        blocks.delete(h.address);
        events.push({ t, op: "free", id, ...extra(undefined) });
        break;
      }
    }
  }
  return {
    header: {
      format: TRACE_FORMAT,
      version: TRACE_VERSION,
      source: source ??
        `${snapshot.allocator ?? "allocator"} history${
          snapshot.device ? ` on ${snapshot.device}` : ""
        }`,
    },
    events,
  };
}

/**
 * Entry `i` of `history`, checked and copied: each field is read once (a
 * getter could answer one value to the check and another to the
 * conversion), and an entry that traps when read is refused with a typed
 * error.
 */
function _checkEntry(history: readonly unknown[], i: number): HistoryEntryLike {
  const bad = (field: string, value: unknown, rule: string): never => {
    throw new InvalidArgumentError(
      `Cannot convert a snapshot: history[${i}].${field} must be ${rule}, received ${
        describeValue(value)
      }`,
      { name: `history[${i}].${field}`, value, limit: rule },
    );
  };
  let e: Record<string, unknown>;
  try {
    const h = history[i];
    if (h === null || typeof h !== "object") bad("", h, "an entry object");
    const o = h as Record<string, unknown>;
    e = {
      action: o.action,
      address: o.address,
      byteLength: o.byteLength,
      requestedByteLength: o.requestedByteLength,
      timeMs: o.timeMs,
      tag: o.tag,
      stack: o.stack,
    };
  } catch (error) {
    if (error instanceof InvalidArgumentError) throw error;
    throw new InvalidArgumentError(
      `Cannot convert a snapshot: history[${i}] cannot be read (${
        error instanceof Error ? error.message : "a non-error was thrown"
      })`,
      { name: `history[${i}]`, value: undefined, limit: "an entry object" },
      { cause: error },
    );
  }
  for (const field of ["address", "byteLength"]) {
    const v = e[field];
    if (!Number.isSafeInteger(v) || (v as number) < 0) {
      bad(field, v, "a non-negative integer");
    }
  }
  const requested = e.requestedByteLength;
  if (
    requested !== undefined &&
    (!Number.isSafeInteger(requested) || (requested as number) < 0)
  ) {
    bad("requestedByteLength", requested, "a non-negative integer");
  }
  if (typeof e.timeMs !== "number" || !Number.isFinite(e.timeMs)) {
    bad("timeMs", e.timeMs, "a finite number");
  }
  for (const field of ["tag", "stack", "action"]) {
    const v = e[field];
    if ((v !== undefined || field === "action") && typeof v !== "string") {
      bad(field, v, "a string");
    }
  }
  return e as unknown as HistoryEntryLike;
}
