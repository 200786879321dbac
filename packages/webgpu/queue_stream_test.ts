import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { QueueStream } from "./queue_stream.ts";
import { newDevice, sharedDevice, skip } from "./_test_device.ts";

describe("QueueStream", { skip }, () => {
  it("QueueStream.fence() completes after work submitted before it", async () => {
    const device = await sharedDevice();
    const stream = QueueStream.of(device);
    const buffer = device.createBuffer({
      size: 1 << 20,
      usage: GPUBufferUsage.COPY_DST,
    });
    device.queue.writeBuffer(buffer, 0, new Uint8Array(1 << 20));
    const fence = stream.fence();
    assert.equal(fence.completed, false);
    await fence.wait();
    assert.equal(fence.completed, true);
    buffer.destroy();
  });

  it("QueueStream.fence() shares one fence per task, taken after the task", async () => {
    const device = await sharedDevice();
    const stream = QueueStream.of(device);
    const a = stream.fence();
    const buffer = device.createBuffer({
      size: 1 << 20,
      usage: GPUBufferUsage.COPY_DST,
    });
    // Work submitted after the first call in the task is covered too.
    device.queue.writeBuffer(buffer, 0, new Uint8Array(1 << 20));
    assert.equal(stream.fence(), a);
    await a.wait();
    assert.equal(a.completed, true);
    const b = stream.fence();
    assert.notEqual(b, a);
    await b.wait();
    buffer.destroy();
  });

  it("QueueStream.of() keeps one stream per device with distinct ids", async () => {
    const a = await sharedDevice();
    const b = await newDevice("other");
    assert.equal(QueueStream.of(a), QueueStream.of(a));
    assert.notEqual(QueueStream.of(a).id, QueueStream.of(b).id);
    b.destroy();
  });

  it("QueueStream.fence() is complete on a lost device", async () => {
    const device = await newDevice("lost-stream");
    const stream = QueueStream.of(device);
    device.destroy();
    await device.lost;
    await Promise.resolve();
    assert.equal(stream.fence().completed, true);
  });
});
