import assert from "node:assert/strict";
import { test } from "node:test";
import { viewSpan } from "./view_span.ts";

test("viewSpan reads typed arrays and DataViews through the built-in getters", () => {
  const buffer = new ArrayBuffer(64);
  assert.deepEqual(viewSpan(new Float32Array(buffer, 8, 4)), {
    buffer,
    byteOffset: 8,
    byteLength: 16,
  });
  assert.deepEqual(viewSpan(new DataView(buffer, 3, 5)), {
    buffer,
    byteOffset: 3,
    byteLength: 5,
  });
  class Liar extends Uint8Array {
    override get byteOffset() {
      return 0;
    }
    override get byteLength() {
      return 1 << 30;
    }
  }
  assert.deepEqual(viewSpan(new Liar(buffer, 16, 4)), {
    buffer,
    byteOffset: 16,
    byteLength: 4,
  });
});

test("viewSpan gives undefined for anything that is not a genuine view", () => {
  const view = new Uint8Array(8);
  const values = [
    undefined,
    null,
    8,
    "bytes",
    Symbol("v"),
    new ArrayBuffer(8),
    { buffer: view.buffer, byteOffset: 0, byteLength: 8 },
    new Proxy(view, {}),
  ];
  values.forEach((value, i) => {
    assert.equal(viewSpan(value), undefined, `value ${i}`);
  });
});
