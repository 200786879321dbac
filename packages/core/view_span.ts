/**
 * The true span of a typed array or `DataView`, read through the built-in
 * getters.
 *
 * @module
 */

const typedArrayProto = Object.getPrototypeOf(Uint8Array.prototype);
const getter = (proto: object, key: string) =>
  Object.getOwnPropertyDescriptor(proto, key)!.get!;
const TA_BUFFER = getter(typedArrayProto, "buffer");
const TA_OFFSET = getter(typedArrayProto, "byteOffset");
const TA_LENGTH = getter(typedArrayProto, "byteLength");
const DV_BUFFER = getter(DataView.prototype, "buffer");
const DV_OFFSET = getter(DataView.prototype, "byteOffset");
const DV_LENGTH = getter(DataView.prototype, "byteLength");

/** The memory a view covers: its buffer, and where in it the view lies. */
export interface ViewSpan {
  /** The buffer the view is over. */
  buffer: ArrayBufferLike;
  /** Where the view starts in `buffer`, in bytes. */
  byteOffset: number;
  /** How many bytes the view covers. */
  byteLength: number;
}

/**
 * The buffer, byte offset and byte length of a typed array or `DataView`,
 * read through the built-in getters, so that a subclass overriding `buffer`,
 * `byteOffset` or `byteLength`, or a proxy, cannot lie about the memory it
 * covers. Anything else (a proxy of a view, a view from another realm that the
 * getters refuse, a plain object) gives `undefined`.
 *
 * @param view The value to read.
 * @returns The span, or `undefined` when `view` is not a genuine view.
 *
 * @example
 * ```ts
 * import { viewSpan } from "@allot/core";
 * import assert from "node:assert/strict";
 *
 * class Liar extends Uint8Array {
 *   override get byteLength() {
 *     return 1 << 20;
 *   }
 * }
 * const span = viewSpan(new Liar(new ArrayBuffer(16), 4, 8));
 * assert.equal(span?.byteOffset, 4);
 * assert.equal(span?.byteLength, 8);
 * assert.equal(viewSpan({ byteLength: 8 }), undefined);
 * ```
 */
export function viewSpan(view: unknown): ViewSpan | undefined {
  if (!ArrayBuffer.isView(view)) return undefined;
  const isDataView = view instanceof DataView;
  try {
    return isDataView
      ? {
        buffer: DV_BUFFER.call(view),
        byteOffset: DV_OFFSET.call(view),
        byteLength: DV_LENGTH.call(view),
      }
      : {
        buffer: TA_BUFFER.call(view),
        byteOffset: TA_OFFSET.call(view),
        byteLength: TA_LENGTH.call(view),
      };
  } catch {
    return undefined; // a proxy, or a view the built-in getters refuse
  }
}
