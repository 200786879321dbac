import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Device } from "./device.ts";
import { InvalidArgumentError } from "./errors.ts";

describe("Device", () => {
  it("Device.parse() reads type and type:index", () => {
    assert.deepEqual(
      [Device.parse("cpu").toString(), Device.parse("webgpu:3").index],
      ["cpu:0", 3],
    );
  });

  it("Device.parse() is the inverse of toString()", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("cpu", "webgpu", "wasm", "npu_2"),
        fc.integer({ min: 0, max: 0xffff }),
        (type, index) => {
          const device = new Device(type, index);
          assert.ok(Device.parse(String(device)).equals(device));
        },
      ),
    );
  });

  it("Device.parse() refuses bad text with InvalidArgumentError", () => {
    for (
      const text of [
        "",
        "CPU",
        "cpu:",
        "cpu:-1",
        "cpu:01",
        "cpu:65536",
        "cpu:1:2",
        " cpu",
        "9gpu",
      ]
    ) {
      assert.throws(() => Device.parse(text), InvalidArgumentError, text);
    }
    assert.throws(
      () => Device.parse(42 as unknown as string),
      InvalidArgumentError,
    );
  });

  it("new Device() refuses bad indices and states the limit", () => {
    assert.throws(() => new Device("cpu", 1.5), /\[0, 65535\], received 1.5/);
    assert.throws(() => new Device("cpu", -1), InvalidArgumentError);
    assert.throws(() => new Device("Has Space"), InvalidArgumentError);
  });

  it("Device.equals() compares type and index", () => {
    assert.ok(Device.cpu().equals(new Device("cpu", 0)));
    assert.ok(!Device.cpu().equals(Device.cpu(1)));
    assert.ok(!new Device("wasm").equals(new Device("webgpu")));
    assert.equal(JSON.stringify({ d: Device.cpu(2) }), '{"d":"cpu:2"}');
  });
});
