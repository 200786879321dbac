/**
 * The allot trace format, version 1: JSON Lines, one JSON object per line.
 *
 * Line 1 is the header: `{"format":"allot-trace","version":1,...}`. Every
 * later line is one event with a time `t` (milliseconds since the recording
 * started, non-decreasing) and an operation `op`:
 *
 * | op | fields | meaning |
 * |---|---|---|
 * | `create` | `id`, `size`, `usage`, `label?`, `mapped?` | a device buffer (or an allocator segment) was created |
 * | `destroy` | `id` | that buffer or segment was destroyed |
 * | `alloc` | `id`, `size`, `usage?`, `buffer?`, `offset?` | a logical allocation (a runtime's pool handed out a buffer, or an allocator handed out a block, optionally inside buffer/segment `buffer` at `offset`) |
 * | `free` | `id` | that logical allocation was given back |
 * | `submit` | `count` | `queue.submit` with `count` command buffers |
 * | `map` | `id`, `mode` | `mapAsync` on buffer `id` (mode bits) |
 * | `unmap` | `id` | `unmap` on buffer `id` |
 * | `write` | `id`, `offset`, `size` | `queue.writeBuffer` into buffer `id` |
 * | `step` | `name?` | a step mark set by the caller |
 * | `stack` | `sid`, `frames` | defines stack `sid` (frames user-first, each `{at, kind}`) for later events |
 * | `error` | `call`, `message` | a wrapped call threw (the error went on to the caller unchanged) |
 * | `dropped` | `count` | the source lost `count` entries here (a history ring buffer wrapped) |
 *
 * Every event may carry `tag` (a string the caller set) and `s` (a stack id
 * defined by an earlier `stack` line). Ids are non-negative integers; an id
 * is live from its `create` (or `alloc`) to its `destroy` (or `free`).
 *
 * @module
 */

import { InvalidArgumentError } from "@allot/core";
import { _checkedTrace } from "./parse_trace.ts";

/** The `format` field of the header line. */
export const TRACE_FORMAT = "allot-trace";
/** The version this package writes and reads. */
export const TRACE_VERSION = 1;

/** Where a stack frame comes from. */
export type FrameKind = "user" | "allot" | "runtime";

/** One stack frame: its text (`fn (file:line:col)`) and where it comes from. */
export interface StackFrame {
  /** The frame as V8 prints it, without the leading `at `. */
  readonly at: string;
  /** `user` for the caller's code, `allot` for allot's, `runtime` for the rest. */
  readonly kind: FrameKind;
}

/** The first line of a trace. */
export interface TraceHeader {
  /** Always `allot-trace`. */
  readonly format: typeof TRACE_FORMAT;
  /** The format version ({@linkcode TRACE_VERSION} for this reader). */
  readonly version: number;
  /** What was recorded (free text, e.g. `tfjs-webgpu 4.22 mobilenet`). */
  readonly source?: string;
  /** When the recording started (ISO 8601). */
  readonly created?: string;
  /** Anything else the recorder wants to keep (adapter, model, options). */
  readonly meta?: Record<string, unknown>;
}

/** Fields every event carries. */
export interface EventBase {
  /** Milliseconds since the recording started. */
  readonly t: number;
  /** The caller's tag at the time of the event. */
  readonly tag?: string;
  /** The id of the stack captured for this event. */
  readonly s?: number;
}

/** A buffer or segment was created. */
export interface CreateEvent extends EventBase {
  /** The operation. */
  readonly op: "create";
  /** The buffer's (or segment's) id. */
  readonly id: number;
  /** Bytes. */
  readonly size: number;
  /** `GPUBufferUsage` bits (0 for allocator segments). */
  readonly usage: number;
  /** The buffer's label, when it has one. */
  readonly label?: string;
  /** Created mapped (`mappedAtCreation`). */
  readonly mapped?: boolean;
}
/** A buffer or segment was destroyed. */
export interface DestroyEvent extends EventBase {
  /** The operation. */
  readonly op: "destroy";
  /** The buffer's id. */
  readonly id: number;
}
/** A logical allocation was handed out. */
export interface AllocEvent extends EventBase {
  /** The operation. */
  readonly op: "alloc";
  /** The allocation's id. */
  readonly id: number;
  /** Bytes asked for. */
  readonly size: number;
  /** `GPUBufferUsage` bits, when known. */
  readonly usage?: number;
  /** The buffer or segment the allocation lies in. */
  readonly buffer?: number;
  /** Byte offset inside `buffer`. */
  readonly offset?: number;
}
/** A logical allocation was given back. */
export interface FreeEvent extends EventBase {
  /** The operation. */
  readonly op: "free";
  /** The allocation's id. */
  readonly id: number;
}
/** `queue.submit`. */
export interface SubmitEvent extends EventBase {
  /** The operation. */
  readonly op: "submit";
  /** Command buffers submitted. */
  readonly count: number;
}
/** `buffer.mapAsync`. */
export interface MapEvent extends EventBase {
  /** The operation. */
  readonly op: "map";
  /** The buffer's id. */
  readonly id: number;
  /** `GPUMapMode` bits. */
  readonly mode: number;
}
/** `buffer.unmap`. */
export interface UnmapEvent extends EventBase {
  /** The operation. */
  readonly op: "unmap";
  /** The buffer's id. */
  readonly id: number;
}
/** `queue.writeBuffer`. */
export interface WriteEvent extends EventBase {
  /** The operation. */
  readonly op: "write";
  /** The buffer's id. */
  readonly id: number;
  /** Byte offset written at. */
  readonly offset: number;
  /** Bytes written. */
  readonly size: number;
}
/** A step mark. */
export interface StepEvent extends EventBase {
  /** The operation. */
  readonly op: "step";
  /** The step's name. */
  readonly name?: string;
}
/** Defines a stack for later events. */
export interface StackEvent extends EventBase {
  /** The operation. */
  readonly op: "stack";
  /** The stack's id, used by later events' `s`. */
  readonly sid: number;
  /** Frames, user frames first. */
  readonly frames: readonly StackFrame[];
}
/** A wrapped call threw. */
export interface ErrorEvent extends EventBase {
  /** The operation. */
  readonly op: "error";
  /** The wrapped call that threw. */
  readonly call: string;
  /** The error's message. */
  readonly message: string;
}
/** Entries lost by the source. */
export interface DroppedEvent extends EventBase {
  /** The operation. */
  readonly op: "dropped";
  /** Entries lost. */
  readonly count: number;
}

/** One line of a trace after the header. */
export type TraceEvent =
  | CreateEvent
  | DestroyEvent
  | AllocEvent
  | FreeEvent
  | SubmitEvent
  | MapEvent
  | UnmapEvent
  | WriteEvent
  | StepEvent
  | StackEvent
  | ErrorEvent
  | DroppedEvent;

/** The operations of {@linkcode TraceEvent}. */
export type TraceOp = TraceEvent["op"];

/** A whole trace: its header and its events in order. */
export interface Trace {
  /** The header line. */
  readonly header: TraceHeader;
  /** The events, in order. */
  readonly events: readonly TraceEvent[];
}

/**
 * Writes a trace as JSON Lines (header first, one event a line, a final
 * newline).
 *
 * @throws {TraceFormatError} When the trace does not validate.
 * @throws {InvalidArgumentError} When the header or an event has a `toJSON`
 * method (what is written would not be what was validated) or a field JSON
 * cannot hold (a BigInt, a cycle).
 *
 * @example
 * ```ts
 * import { formatTrace, parseTrace } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * const text = formatTrace(trace);
 * assert.ok(text.endsWith("\n"));
 * assert.deepEqual(parseTrace(text), trace);
 * ```
 */
export function formatTrace(trace: Trace): string {
  // what is written is the copy that was validated; a toJSON method is
  // looked for on the copy (own fields) and on the original (inherited)
  const checked = _checkedTrace(trace, true);
  const lines = [_line(checked.header, trace.header, "header")];
  const events = checked.events;
  for (let i = 0; i < events.length; i++) {
    lines.push(_line(events[i], trace.events[i], `events[${i}]`));
  }
  return lines.join("\n") + "\n";
}

function _line(value: unknown, original: unknown, name: string): string {
  const frames = (value as { frames?: unknown }).frames;
  const parts = Array.isArray(frames)
    ? [value, original, ...frames]
    : [value, original];
  let why: string | undefined;
  if (
    parts.some((p) => typeof (p as { toJSON?: unknown }).toJSON === "function")
  ) {
    why = "it has a toJSON method";
  } else {
    try {
      return JSON.stringify(value);
    } catch (error) {
      why = `JSON cannot hold it (${(error as Error)?.message})`;
    }
  }
  throw new InvalidArgumentError(
    `Cannot write a trace: ${name} is not plain JSON data: ${why}`,
    { name, value, limit: "plain JSON data" },
  );
}
