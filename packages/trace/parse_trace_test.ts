import assert from "node:assert/strict";
import fc from "fast-check";
import {
  formatTrace,
  parseTrace,
  type TraceEvent,
  TraceFormatError,
} from "./mod.ts";

const HEADER = `{"format":"allot-trace","version":1,"source":"t"}`;
const lines = (...ls: string[]) => [HEADER, ...ls].join("\n");

function throwsAt(text: string, line: number, pattern: RegExp): void {
  assert.throws(() => parseTrace(text), (err: unknown) => {
    assert.ok(err instanceof TraceFormatError, String(err));
    assert.equal(err.line, line, err.message);
    assert.match(err.message, pattern);
    if (line > 0) assert.match(err.message, new RegExp(`line ${line}:`));
    return true;
  });
}

Deno.test("parseTrace reads every op back", () => {
  const text = lines(
    `{"t":0,"op":"stack","sid":0,"frames":[{"at":"f (a.ts:1:1)","kind":"user"}]}`,
    `{"t":0,"op":"create","id":0,"size":256,"usage":132,"label":"x","tag":"w","s":0}`,
    `{"t":1,"op":"alloc","id":1,"size":200,"usage":132,"buffer":0,"offset":0}`,
    `{"t":1,"op":"write","id":0,"offset":0,"size":200}`,
    `{"t":2,"op":"submit","count":1}`,
    `{"t":3,"op":"map","id":0,"mode":1}`,
    `{"t":3,"op":"unmap","id":0}`,
    `{"t":4,"op":"step","name":"s1"}`,
    `{"t":4,"op":"free","id":1}`,
    `{"t":5,"op":"destroy","id":0}`,
    `{"t":5,"op":"error","call":"createBuffer","message":"no"}`,
    `{"t":6,"op":"dropped","count":3}`,
    ``,
  );
  const trace = parseTrace(text);
  assert.equal(trace.header.version, 1);
  assert.deepEqual(trace.events.map((e) => e.op), [
    "stack",
    "create",
    "alloc",
    "write",
    "submit",
    "map",
    "unmap",
    "step",
    "free",
    "destroy",
    "error",
    "dropped",
  ]);
  assert.equal(formatTrace(trace), text);
});

Deno.test("parseTrace names the bad line of a hand-edited or truncated trace", () => {
  throwsAt("", 0, /empty/);
  throwsAt(`{"format":"other","version":1}`, 1, /format/);
  throwsAt(
    `{"format":"allot-trace","version":2}`,
    1,
    /version 2 is not supported/,
  );
  throwsAt(`{"format":"allot-trace"`, 1, /not JSON/);
  throwsAt(
    lines(
      `{"t":0,"op":"create","id":0,"size":1,"usage":1}`,
      `{"t":1,"op":"dest`,
    ),
    3,
    /not JSON.*truncated/,
  );
  throwsAt(
    lines(`{"t":0,"op":"create","id":0,"size":-1,"usage":1}`),
    2,
    /"size" must be a non-negative integer/,
  );
  throwsAt(
    lines(`{"t":0,"op":"create","id":0,"size":1.5,"usage":1}`),
    2,
    /"size"/,
  );
  throwsAt(
    lines(`{"t":0,"op":"create","id":0,"size":"8","usage":1}`),
    2,
    /"size"/,
  );
  throwsAt(lines(`{"t":0,"op":"grow","id":0}`), 2, /unknown "op" "grow"/);
  throwsAt(
    lines(`{"t":2,"op":"step"}`, `{"t":1,"op":"step"}`),
    3,
    /time goes back/,
  );
  throwsAt(lines(`{"op":"step"}`), 2, /"t"/);
  throwsAt(
    lines(`{"t":0,"op":"destroy","id":4}`),
    2,
    /buffer 4 is destroyed but not live/,
  );
  throwsAt(
    lines(`{"t":0,"op":"free","id":4}`),
    2,
    /allocation 4 is freed but not live/,
  );
  throwsAt(
    lines(
      `{"t":0,"op":"alloc","id":1,"size":1}`,
      `{"t":0,"op":"alloc","id":1,"size":1}`,
    ),
    3,
    /handed out twice/,
  );
  throwsAt(
    lines(
      `{"t":0,"op":"create","id":1,"size":1,"usage":1}`,
      `{"t":0,"op":"create","id":1,"size":1,"usage":1}`,
    ),
    3,
    /created twice/,
  );
  throwsAt(
    lines(`{"t":0,"op":"alloc","id":1,"size":1,"s":3}`),
    2,
    /stack 3 is used before/,
  );
  throwsAt(
    lines(`{"t":0,"op":"stack","sid":0,"frames":[{"at":1}]}`),
    2,
    /frame 0/,
  );
  throwsAt(lines(`[1,2]`), 2, /JSON object/);
  throwsAt(lines(`{"t":0,"op":"step","tag":5}`), 2, /"tag" must be a string/);
});

/** Random valid traces: allocations and buffers with random lifetimes. */
const validTrace = fc.array(
  fc.tuple(
    fc.constantFrom("alloc", "create", "free", "destroy", "step", "submit"),
    fc.nat(1 << 20),
  ),
  { maxLength: 60 },
).map((ops) => {
  const events: TraceEvent[] = [];
  const live: number[] = [], bufs: number[] = [];
  let id = 0, t = 0;
  for (const [op, n] of ops) {
    t += n % 3;
    if (op === "alloc") {
      events.push({ t, op, id: id, size: n, usage: 128 }), live.push(id++);
    } else if (op === "create") {
      events.push({ t, op, id: id, size: n, usage: 128 }), bufs.push(id++);
    } else if (op === "free" && live.length) {
      events.push({ t, op, id: live.splice(n % live.length, 1)[0] });
    } else if (op === "destroy" && bufs.length) {
      events.push({ t, op, id: bufs.splice(n % bufs.length, 1)[0] });
    } else if (op === "step") events.push({ t, op: "step", name: `s${n}` });
    else if (op === "submit") events.push({ t, op, count: n % 4 });
  }
  return formatTrace({ header: { format: "allot-trace", version: 1 }, events });
});

Deno.test("parseTrace: formatTrace round trip, and any cut inside a line names that line (fast-check)", () => {
  fc.assert(
    fc.property(validTrace, fc.nat(), (text, cut) => {
      const trace = parseTrace(text);
      assert.equal(formatTrace(trace), text);
      const body = text.trimEnd();
      const at = 1 + (cut % (body.length - 1));
      const cutText = body.slice(0, at);
      if (body[at] === "\n" || body[at - 1] === "\n") return;
      const line = cutText.split("\n").length;
      throwsAt(cutText, line, /not JSON/);
    }),
    { numRuns: 300 },
  );
});
