// Freed arrays are detached on runtimes without ArrayBuffer.prototype.transfer
// (Node 20): the registry falls back to a transferring structuredClone, so a
// stale view reads length 0 there too (the README's example asserts it).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { OwnershipRegistry } from "./mod.ts";

describe("OwnershipRegistry: detach without transfer()", () => {
  it("unregister detaches the array's buffer when transfer() is missing", () => {
    const proto = ArrayBuffer.prototype as { transfer?: unknown };
    const saved = Object.getOwnPropertyDescriptor(proto, "transfer");
    Object.defineProperty(proto, "transfer", {
      value: undefined,
      configurable: true,
      writable: true,
    });
    try {
      using registry = new OwnershipRegistry();
      const data = registry.newArray("f32", 1000);
      registry.unregister(data);
      assert.equal(data.length, 0);
      assert.equal(data.buffer.byteLength, 0);
    } finally {
      if (saved) Object.defineProperty(proto, "transfer", saved);
      else delete proto.transfer;
    }
    assert.equal(
      typeof (ArrayBuffer.prototype as { transfer?: unknown }).transfer,
      "function",
    );
  });
});
