/**
 * Slot traces ({@linkcode Trace}) as JSON, for the benches that hand the
 * traces the Deno side loaded to their Node side (Node has no reader of the
 * recorded traces): the typed arrays become plain arrays and back. Runtime
 * neutral.
 *
 * @module
 */

import type { Trace } from "./trace.ts";

/**
 * The traces as JSON text, typed arrays as plain arrays.
 *
 * @param traces The traces (extra fields, as a `RealTrace`'s, go along).
 * @returns The JSON text.
 */
export function tracesToJson(traces: readonly Trace[]): string {
  return JSON.stringify(traces.map((t) => ({
    ...t,
    kind: [...t.kind],
    slot: [...t.slot],
    byteLength: [...t.byteLength],
  })));
}

/**
 * The traces of {@linkcode tracesToJson}'s text, with their typed arrays.
 *
 * @param text The JSON text.
 * @returns The traces.
 */
export function tracesFromJson(text: string): Trace[] {
  return (JSON.parse(text) as Trace[]).map((t) => ({
    ...t,
    kind: Uint8Array.from(t.kind),
    slot: Int32Array.from(t.slot),
    byteLength: Int32Array.from(t.byteLength),
  }));
}
