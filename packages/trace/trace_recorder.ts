import {
  describeValue,
  InvalidArgumentError,
  optionOr,
  validateInteger,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { captureStack, type StackCaptureOptions } from "./frame_kind.ts";
import {
  formatTrace,
  type Trace,
  TRACE_FORMAT,
  TRACE_VERSION,
  type TraceEvent,
  type TraceHeader,
} from "./trace_format.ts";

/**
 * The stack capture options, checked and copied now (each read once): a bad
 * depth, a misspelt key or a classifier that is not a function was kept and
 * failed later, inside the recorded runtime's `createBuffer`, and a later
 * change to the caller's object reached the recorder.
 */
function _checkedCapture(capture: unknown): StackCaptureOptions {
  validateObject(capture, "capture");
  const given = capture as StackCaptureOptions;
  validateOptionKeys(given, ["depth", "classify"], "capture");
  const depth = validateInteger(optionOr(given.depth, 64), 0, 10_000, "depth");
  const classify = given.classify;
  if (classify !== undefined && typeof classify !== "function") {
    throw new InvalidArgumentError(
      `Invalid classify: must be a function, received ${
        describeValue(classify)
      }`,
      { name: "classify", value: classify, limit: "a function" },
    );
  }
  return Object.freeze(
    classify === undefined ? { depth } : { depth, classify },
  );
}

const _PUSH_OPS: ReadonlySet<string> = new Set([
  "create",
  "destroy",
  "alloc",
  "free",
  "submit",
  "map",
  "unmap",
  "write",
  "step",
  "error",
  "dropped",
]);

/** Which events get a captured stack. */
export type StackCapture = "allocations" | "all" | "none";

/** Options of {@linkcode TraceRecorder}. */
export interface TraceRecorderOptions {
  /** Free text for the header's `source`. */
  readonly source?: string;
  /** Extra header fields. */
  readonly meta?: Record<string, unknown>;
  /** Stacks for `create`/`alloc` only (default), for every event, or none. */
  readonly stacks?: StackCapture;
  /** Stack capture options (depth, classification). */
  readonly capture?: StackCaptureOptions;
  /** The clock, in milliseconds (default `performance.now`). */
  readonly now?: () => number;
}

/**
 * Collects trace events in order: the sink that device and pool recorders
 * write to, and where the caller sets step marks and tags.
 *
 * @example
 * ```ts
 * import { parseTrace, TraceRecorder } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const recorder = new TraceRecorder({ source: "demo", stacks: "none" });
 * recorder.step("load");
 * const prev = recorder.setTag("weights");
 * assert.equal(prev, undefined);
 * assert.equal(recorder.tag, "weights");
 * const trace = parseTrace(recorder.toJsonLines());
 * assert.equal(trace.header.source, "demo");
 * assert.deepEqual(trace.events.map((e) => e.op), ["step"]);
 * ```
 */
export class TraceRecorder {
  readonly #events: TraceEvent[] = [];
  readonly #stackIds = new Map<string, number>();
  readonly #now: () => number;
  readonly #t0: number;
  readonly #header: TraceHeader;
  readonly #stacks: StackCapture;
  readonly #capture: StackCaptureOptions;
  #last = 0;
  #tag: string | undefined;
  #nextId = 0;

  /** Starts a recording (the clock starts now). */
  constructor(options: TraceRecorderOptions = {}) {
    validateObject(options, "options");
    validateOptionKeys(
      options,
      ["source", "meta", "stacks", "capture", "now"],
      "TraceRecorder",
    );
    const stacks = options.stacks ?? "allocations";
    if (stacks !== "allocations" && stacks !== "all" && stacks !== "none") {
      throw new InvalidArgumentError(
        `Invalid stacks: must be "allocations", "all" or "none", received ${
          describeValue(stacks)
        }`,
        {
          name: "stacks",
          value: stacks,
          limit: '"allocations", "all", "none"',
        },
      );
    }
    const capture = _checkedCapture(options.capture ?? {});
    const now = options.now ?? (() => performance.now());
    if (typeof now !== "function") {
      throw new InvalidArgumentError(
        `Invalid now: must be a function returning milliseconds, received ${
          describeValue(now)
        }`,
        { name: "now", value: now, limit: "a function" },
      );
    }
    for (const key of ["source"] as const) {
      const v = options[key];
      if (v !== undefined && typeof v !== "string") {
        throw new InvalidArgumentError(
          `Invalid ${key}: must be a string, received ${describeValue(v)}`,
          { name: key, value: v, limit: "a string" },
        );
      }
    }
    let meta: Record<string, unknown> | undefined;
    if (options.meta !== undefined) {
      validateObject(options.meta, "meta");
      // a copy, taken now: a later change to the caller's object, or a
      // value JSON cannot hold, never reaches the header
      try {
        meta = JSON.parse(JSON.stringify(options.meta));
      } catch (error) {
        throw new InvalidArgumentError(
          `Invalid meta: must be plain JSON data (${
            (error as Error)?.message
          })`,
          { name: "meta", value: options.meta, limit: "plain JSON data" },
        );
      }
      validateObject(meta, "meta");
    }
    this.#stacks = stacks;
    this.#capture = capture;
    this.#now = now;
    this.#t0 = this.#clock(0);
    // frozen to the leaves: toTrace() hands it out, and a caller's change
    // must never reach a later trace
    this.#header = _deepFreeze({
      format: TRACE_FORMAT,
      version: TRACE_VERSION,
      ...(options.source !== undefined ? { source: options.source } : {}),
      created: new Date().toISOString(),
      ...(meta !== undefined ? { meta } : {}),
    });
  }

  /**
   * The events recorded so far: a copy of the list, taken at each read, of
   * frozen events (changing it changes nothing here).
   */
  get events(): readonly TraceEvent[] {
    return this.#events.slice();
  }

  /** The current tag, or undefined. */
  get tag(): string | undefined {
    return this.#tag;
  }

  /** Sets the tag carried by later events (undefined clears it); returns the previous one. */
  setTag(tag: string | undefined): string | undefined {
    if (tag !== undefined && typeof tag !== "string") {
      throw new InvalidArgumentError(
        `Invalid tag: must be a string or undefined, received ${
          describeValue(tag)
        }`,
        { name: "tag", value: tag, limit: "a string" },
      );
    }
    const prev = this.#tag;
    this.#tag = tag;
    return prev;
  }

  /** Runs `fn` with `tag` set, restoring the previous tag afterwards (also on throw). */
  withTag<T>(tag: string, fn: () => T): T {
    if (typeof fn !== "function") {
      throw new InvalidArgumentError(
        `Invalid fn: must be a function, received ${describeValue(fn)}`,
        { name: "fn", value: fn, limit: "a function" },
      );
    }
    const prev = this.setTag(tag);
    try {
      return fn();
    } finally {
      this.#tag = prev;
    }
  }

  /** Writes a step mark. */
  step(name?: string): void {
    if (name !== undefined && typeof name !== "string") {
      throw new InvalidArgumentError(
        `Invalid step name: must be a string or undefined, received ${
          describeValue(name)
        }`,
        { name: "name", value: name, limit: "a string" },
      );
    }
    this.push(
      name === undefined ? { op: "step" } : { op: "step", name },
      false,
    );
  }

  // The user's clock, read defensively: a throw or a non-number reads as
  // `fallback` (time stands still rather than the trace going bad).
  #clock(fallback: number): number {
    try {
      const t = this.#now();
      return typeof t === "number" && Number.isFinite(t) ? t : fallback;
    } catch {
      return fallback;
    }
  }

  /** A fresh id for a buffer or an allocation. */
  nextId(): number {
    return this.#nextId++;
  }

  /**
   * Appends an event (time and tag filled in); with `allocation` true a stack
   * is captured when the options ask for one. `skip` drops that many extra
   * frames of the caller's own.
   *
   * @throws {InvalidArgumentError} When `event` is not an object with a
   * known `op` (a `"stack"` event is the recorder's own); nothing is
   * recorded. The event's own `t` never replaces the recorder's clock.
   */
  push(
    event: { op: TraceEvent["op"]; [k: string]: unknown },
    allocation: boolean,
    skip = 0,
  ): void {
    if (
      typeof event !== "object" || event === null ||
      !_PUSH_OPS.has(event.op as string)
    ) {
      throw new InvalidArgumentError(
        `Cannot record an event: must be an object with a known "op", received ${
          describeValue(
            typeof event === "object" && event !== null ? event.op : event,
          )
        }`,
        { name: "event", value: event, limit: [..._PUSH_OPS].join(", ") },
      );
    }
    let t = Math.round((this.#clock(this.#t0) - this.#t0) * 1000) / 1000;
    // a clock that goes back (or lies) never makes time go back in the trace
    if (!(t >= this.#last) || !Number.isFinite(t)) t = this.#last;
    this.#last = t;
    const e: Record<string, unknown> = { t, ...event };
    e.t = t; // the event's own "t" could make time go back
    if (this.#tag !== undefined) e.tag = this.#tag;
    if (
      this.#stacks === "all" || (allocation && this.#stacks === "allocations")
    ) {
      const frames = captureStack(this.#capture, skip + 1);
      const key = JSON.stringify(frames);
      let sid = this.#stackIds.get(key);
      if (sid === undefined) {
        sid = this.#stackIds.size;
        this.#stackIds.set(key, sid);
        this.#events.push(_deepFreeze({ t, op: "stack", sid, frames }));
      }
      e.s = sid;
    }
    this.#events.push(Object.freeze(e) as unknown as TraceEvent);
  }

  /** The trace so far (a copy of the event list). */
  toTrace(): Trace {
    return { header: this.#header, events: this.#events.slice() };
  }

  /** The trace so far as JSON Lines. */
  toJsonLines(): string {
    return formatTrace({ header: this.#header, events: this.#events });
  }
}

/** Freezes plain JSON data to the leaves (objects and arrays). */
function _deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const v of Object.values(value)) _deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
