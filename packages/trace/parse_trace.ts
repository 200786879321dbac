import { describeValue, InvalidArgumentError } from "@allot/core";
import { TraceFormatError } from "./trace_error.ts";
import { _messageOf } from "./_message.ts";
import {
  type FrameKind,
  type StackFrame,
  type Trace,
  TRACE_FORMAT,
  TRACE_VERSION,
  type TraceEvent,
  type TraceHeader,
} from "./trace_format.ts";

const KINDS: ReadonlySet<string> = new Set(["user", "allot", "runtime"]);

type Raw = Record<string, unknown>;

function fail(line: number, problem: string): never {
  throw new TraceFormatError(line, problem);
}

function id(o: Raw, key: string, line: number): number {
  const v = o[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    fail(
      line,
      `"${key}" must be a non-negative integer, got ${describeValue(v)}`,
    );
  }
  return v;
}

function optId(o: Raw, key: string, line: number): void {
  if (o[key] !== undefined) id(o, key, line);
}

function str(o: Raw, key: string, line: number, optional: boolean): void {
  const v = o[key];
  if (v === undefined && optional) return;
  if (typeof v !== "string") {
    fail(line, `"${key}" must be a string, got ${describeValue(v)}`);
  }
}

function frames(v: unknown, line: number): readonly StackFrame[] {
  if (!Array.isArray(v)) fail(line, `"frames" must be an array`);
  for (const [i, f] of v.entries()) {
    if (
      f === null || typeof f !== "object" || typeof f.at !== "string" ||
      !KINDS.has(f.kind)
    ) {
      fail(line, `frame ${i} must be {at: string, kind: user|allot|runtime}`);
    }
  }
  return v as StackFrame[];
}

/** Checks one parsed header object; returns it typed. */
function header(o: unknown): TraceHeader {
  if (o === null || typeof o !== "object" || Array.isArray(o)) {
    fail(1, "the header must be a JSON object");
  }
  const h = o as Raw;
  if (h.format !== TRACE_FORMAT) {
    fail(
      1,
      `the header's "format" must be "${TRACE_FORMAT}", got ${
        describeValue(h.format)
      }`,
    );
  }
  if (h.version !== TRACE_VERSION) {
    fail(
      1,
      `version ${
        describeValue(h.version)
      } is not supported (this reader knows version ${TRACE_VERSION})`,
    );
  }
  return h as unknown as TraceHeader;
}

/**
 * Reads a trace from JSON Lines text and checks every line: the header, the
 * fields of each event, times that never go back, ids created before use
 * and not created twice, stacks defined before they are used. Blank lines are
 * skipped. Throws {@linkcode TraceFormatError} naming the first bad line, so
 * nothing is ever drawn from bad data.
 *
 * @example
 * ```ts
 * import { parseTrace } from "@allot/trace";
 * import assert from "node:assert/strict";
 * const trace = parseTrace([
 *   `{"format":"allot-trace","version":1,"source":"demo"}`,
 *   `{"t":0,"op":"create","id":0,"size":1024,"usage":128,"tag":"weights"}`,
 *   `{"t":1,"op":"create","id":1,"size":512,"usage":128,"tag":"act"}`,
 *   `{"t":2,"op":"destroy","id":1}`,
 * ].join("\n"));
 * assert.equal(trace.header.source, "demo");
 * assert.equal(trace.events.length, 3);
 * ```
 */
export function parseTrace(text: string): Trace {
  if (typeof text !== "string") {
    throw new InvalidArgumentError(
      `Cannot parse a trace: text must be a string, received ${
        describeValue(text)
      }`,
      { name: "text", value: text, limit: "a string" },
    );
  }
  // a byte order mark (an editor's) is not part of the header line
  const lines = (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text)
    .split("\n");
  let first = 0;
  while (first < lines.length && lines[first].trim() === "") first++;
  if (first >= lines.length) fail(0, "empty text: no header line");
  const h = header(parseLine(lines[first], first + 1));
  const events: TraceEvent[] = [];
  const st = newState();
  for (let i = first + 1; i < lines.length; i++) {
    const text = lines[i];
    if (text.trim() === "") continue;
    const n = i + 1;
    events.push(checkEvent(parseLine(text, n), n, st));
  }
  return { header: h, events };
}

/**
 * Checks a {@linkcode Trace} object as {@linkcode parseTrace} checks text
 * (the header, every event's fields, times, ids and stacks), for traces
 * made in code or read elsewhere; the replay, timeline and report functions
 * call it before they read a trace. Event `i` is reported as line `i + 2`
 * (the line it has in {@linkcode formatTrace}'s output).
 *
 * @param trace The value to check.
 * @returns The trace, unchanged.
 * @throws {InvalidArgumentError} When `trace` is not an object.
 * @throws {TraceFormatError} Naming the first bad event.
 *
 * @example
 * ```ts
 * import { TraceFormatError, validateTrace } from "@allot/trace";
 * import assert from "node:assert/strict";
 *
 * const header = { format: "allot-trace", version: 1 } as const;
 * assert.throws(
 *   () => validateTrace({ header, events: [{ t: 0, op: "free", id: 1 }] }),
 *   TraceFormatError,
 * );
 * ```
 */
export function validateTrace(trace: Trace): Trace {
  _checkedTrace(trace);
  return trace;
}

/**
 * Validates `trace` as {@linkcode validateTrace} does and returns a copy of
 * exactly what was validated: each field of the header, of each event and
 * of each stack frame is read once, so a getter or proxy that answers
 * differently on a later read cannot slip unchecked values past the check
 * (the replay, timeline and format functions read the copy). The copy
 * holds the fields the format defines; `whole` keeps every own field too
 * (for {@linkcode formatTrace}, which writes them), at about twice the cost.
 */
export function _checkedTrace(trace: Trace, whole = false): Trace {
  if (trace === null || typeof trace !== "object" || isArray(trace)) {
    throw new InvalidArgumentError(
      `Cannot read a trace: must be an object with a header and events, received ${
        describeValue(trace)
      }`,
      { name: "trace", value: trace, limit: "a Trace" },
    );
  }
  let rawHeader: unknown, events: unknown;
  try {
    rawHeader = (trace as unknown as Raw).header;
    events = (trace as unknown as Raw).events;
  } catch (error) {
    fail(0, `the trace could not be read (${_messageOf(error)})`);
  }
  const h = header(copyOf(rawHeader, 1, HEADER_FIELDS));
  if (!isArray(events)) {
    fail(0, `"events" must be an array, got ${describeValue(events)}`);
  }
  let n: number;
  try {
    n = (events as unknown[]).length;
  } catch (error) {
    fail(0, `"events" could not be read (${_messageOf(error)})`);
  }
  const out = checkedEvents(events as unknown[], n, whole);
  return { header: h, events: out };
}

const HEADER_FIELDS = ["format", "version"];
const EVENT_FIELDS = [
  "t",
  "op",
  "tag",
  "s",
  "id",
  "size",
  "usage",
  "label",
  "mapped",
  "buffer",
  "offset",
  "count",
  "mode",
  "name",
  "sid",
  "frames",
  "call",
  "message",
];
const FRAME_FIELDS = ["at", "kind"];

/** The checked copies of `n` events (pushed: a preallocated array is holey). */
function checkedEvents(
  events: unknown[],
  n: number,
  whole: boolean,
): TraceEvent[] {
  const st = newState();
  const out: TraceEvent[] = [];
  for (let i = 0; i < n; i++) {
    let event: unknown;
    try {
      event = events[i];
    } catch (error) {
      fail(i + 2, `the event could not be read (${_messageOf(error)})`);
    }
    out.push(checkEvent(
      whole ? copyOf(event, i + 2, EVENT_FIELDS) : fieldsOf(event, i + 2),
      i + 2,
      st,
    ));
  }
  return out;
}

/**
 * A shallow copy of an object's own enumerable fields, plus the named fields
 * it inherits (and, for an event, a copy of its stack frames), each read
 * once; anything else as it is, for the checks to refuse.
 */
function copyOf(
  value: unknown,
  line: number,
  fields: readonly string[],
): unknown {
  if (value === null || typeof value !== "object") return value;
  try {
    if (Array.isArray(value)) return value;
    const copy = plainCopy(value, fields);
    const frames = copy.frames;
    if (fields === EVENT_FIELDS && Array.isArray(frames)) {
      const n = frames.length;
      const list = new Array<unknown>(n);
      for (let i = 0; i < n; i++) {
        const f = frames[i];
        list[i] = f !== null && typeof f === "object" && !Array.isArray(f)
          ? plainCopy(f, FRAME_FIELDS)
          : f;
      }
      copy.frames = list;
    }
    return copy;
  } catch (error) {
    fail(
      line,
      `the ${line === 1 ? "header" : "event"} could not be read (${
        _messageOf(error)
      })`,
    );
  }
}

/**
 * A new event holding the fields the format defines for its op, each read
 * once (inherited ones too); anything but an object as it is, for the
 * checks to refuse. Named reads, no spread: replays read every event.
 */
function fieldsOf(value: unknown, line: number): unknown {
  if (value === null || typeof value !== "object") return value;
  try {
    if (Array.isArray(value)) return value;
    const v = value as Raw;
    const op = v.op;
    const c: Raw = { t: v.t, op };
    const tag = v.tag, s = v.s;
    if (tag !== undefined) c.tag = tag;
    if (s !== undefined) c.s = s;
    switch (op) {
      case "create":
        c.id = v.id, c.size = v.size, c.usage = v.usage;
        copyOptional(v, c, "label");
        copyOptional(v, c, "mapped");
        break;
      case "alloc":
        c.id = v.id, c.size = v.size;
        copyOptional(v, c, "usage");
        copyOptional(v, c, "buffer");
        copyOptional(v, c, "offset");
        break;
      case "destroy":
      case "free":
      case "unmap":
        c.id = v.id;
        break;
      case "map":
        c.id = v.id, c.mode = v.mode;
        break;
      case "write":
        c.id = v.id, c.offset = v.offset, c.size = v.size;
        break;
      case "submit":
      case "dropped":
        c.count = v.count;
        break;
      case "step":
        copyOptional(v, c, "name");
        break;
      case "stack": {
        c.sid = v.sid;
        const frames = v.frames;
        if (Array.isArray(frames)) {
          const n = frames.length;
          const list = new Array<unknown>(n);
          for (let i = 0; i < n; i++) {
            const f = frames[i];
            list[i] = f !== null && typeof f === "object" && !Array.isArray(f)
              ? { at: f.at, kind: f.kind }
              : f;
          }
          c.frames = list;
        } else c.frames = frames;
        break;
      }
      case "error":
        c.call = v.call, c.message = v.message;
        break;
    }
    return c;
  } catch (error) {
    fail(line, `the event could not be read (${_messageOf(error)})`);
  }
}

function copyOptional(from: Raw, to: Raw, key: string): void {
  const value = from[key];
  if (value !== undefined) to[key] = value;
}

/** `Array.isArray`, counting a revoked proxy as an array (refused). */
function isArray(value: unknown): boolean {
  try {
    return Array.isArray(value);
  } catch {
    return true;
  }
}

function plainCopy(value: object, fields: readonly string[]): Raw {
  const copy = { ...value } as Raw;
  // a plain object (what JSON.parse and the recorder make) inherits none of
  // the fields: only a class instance's prototype is searched
  const proto = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) return copy;
  for (const key of fields) {
    if (!Object.hasOwn(copy, key) && key in value) {
      copy[key] = (value as Raw)[key];
    }
  }
  return copy;
}

interface _State {
  liveBuffers: Set<number>;
  liveAllocs: Set<number>;
  stacks: Set<number>;
  last: number;
}

function newState(): _State {
  return {
    liveBuffers: new Set(),
    liveAllocs: new Set(),
    stacks: new Set(),
    last: 0,
  };
}

/** Checks event `o` of line `n` against the state so far; returns it typed. */
function checkEvent(o: unknown, n: number, st: _State): TraceEvent {
  if (o === null || typeof o !== "object" || Array.isArray(o)) {
    fail(n, "an event must be a JSON object");
  }
  const e = o as Raw;
  const t = e.t;
  if (typeof t !== "number" || !Number.isFinite(t) || t < 0) {
    fail(
      n,
      `"t" must be a finite non-negative number, got ${describeValue(t)}`,
    );
  }
  if (t < st.last) fail(n, `time goes back: ${t} after ${st.last}`);
  st.last = t;
  str(e, "tag", n, true);
  if (e.s !== undefined) {
    const s = id(e, "s", n);
    if (!st.stacks.has(s)) {
      fail(n, `stack ${s} is used before its "stack" line`);
    }
  }
  switch (e.op) {
    case "create": {
      const b = id(e, "id", n);
      id(e, "size", n);
      id(e, "usage", n);
      str(e, "label", n, true);
      if (e.mapped !== undefined && typeof e.mapped !== "boolean") {
        fail(n, `"mapped" must be a boolean`);
      }
      if (st.liveBuffers.has(b)) fail(n, `buffer ${b} is created twice`);
      st.liveBuffers.add(b);
      break;
    }
    case "destroy": {
      const b = id(e, "id", n);
      if (!st.liveBuffers.delete(b)) {
        fail(n, `buffer ${b} is destroyed but not live`);
      }
      break;
    }
    case "alloc": {
      const a = id(e, "id", n);
      id(e, "size", n);
      optId(e, "usage", n);
      optId(e, "buffer", n);
      optId(e, "offset", n);
      if (st.liveAllocs.has(a)) fail(n, `allocation ${a} is handed out twice`);
      st.liveAllocs.add(a);
      break;
    }
    case "free": {
      const a = id(e, "id", n);
      if (!st.liveAllocs.delete(a)) {
        fail(n, `allocation ${a} is freed but not live`);
      }
      break;
    }
    case "submit":
      id(e, "count", n);
      break;
    case "map":
      id(e, "id", n);
      id(e, "mode", n);
      break;
    case "unmap":
      id(e, "id", n);
      break;
    case "write":
      id(e, "id", n);
      id(e, "offset", n);
      id(e, "size", n);
      break;
    case "step":
      str(e, "name", n, true);
      break;
    case "stack": {
      const s = id(e, "sid", n);
      if (st.stacks.has(s)) fail(n, `stack ${s} is defined twice`);
      frames(e.frames, n);
      st.stacks.add(s);
      break;
    }
    case "error":
      str(e, "call", n, false);
      str(e, "message", n, false);
      break;
    case "dropped":
      id(e, "count", n);
      break;
    default:
      fail(n, `unknown "op" ${describeValue(e.op)}`);
  }
  return e as unknown as TraceEvent;
}

function parseLine(text: string, n: number): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    fail(
      n,
      `not JSON (${(err as Error).message}); a truncated or hand-edited file?`,
    );
  }
}

/**
 * The kinds a frame may have.
 *
 * @example
 * ```ts
 * import { isFrameKind } from "@allot/trace";
 * import assert from "node:assert/strict";
 * assert.equal(isFrameKind("user"), true);
 * assert.equal(isFrameKind("kernel"), false);
 * ```
 */
export function isFrameKind(v: unknown): v is FrameKind {
  return typeof v === "string" && KINDS.has(v);
}
