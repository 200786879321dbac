// dtypeByteSize, encodeElement and validateBinding from the outside
// (review 8): a dtype that cannot be turned into a key (an object with no
// prototype, so no toString) and validateBinding's options that are not an
// object (null included) are refused with InvalidArgumentError naming them,
// never a TypeError from reading them.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "@allot/core";
import { dtypeByteSize, encodeElement, type GpuDtype } from "./dtype.ts";
import { type GpuBinding, validateBinding } from "./gpu_binding.ts";
import { mockGpu } from "./_test_mock_device.ts";

function refused(f: () => unknown, argument: string): void {
  let caught: unknown;
  try {
    f();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof InvalidArgumentError, String(caught));
  assert.equal(caught.argument, argument);
}

describe("dtype and binding checks (review 8)", () => {
  it("dtypeByteSize and encodeElement refuse any dtype that is not a name, a prototype-less object too", () => {
    const bare = Object.create(null);
    for (
      const bad of [bare, { toString: () => "f32" }, Symbol("f32"), 4, null]
    ) {
      refused(() => dtypeByteSize(bad as GpuDtype), "dtype");
      refused(() => encodeElement(bad as GpuDtype, 1), "dtype");
    }
    assert.equal(dtypeByteSize("f32"), 4);
  });

  it("validateBinding refuses options that are not an object", () => {
    const gpu = mockGpu();
    const binding = {
      buffer: gpu.device.createBuffer({ size: 1024, usage: 0x80 }),
      offset: 0,
      size: 256,
    } as unknown as GpuBinding;
    for (const bad of [null, 1, "bind", true]) {
      refused(
        () => validateBinding(gpu.device, binding, bad as unknown as object),
        "options",
      );
    }
  });
});
