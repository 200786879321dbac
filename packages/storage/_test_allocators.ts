// Allocators and a backend used by the tests.
import { AllocatorBase, DataPtr, Device } from "@allot/core";
import type { BufferBackend, StridedBinding } from "./buffer_backend.ts";
import { type AnyTypedArray, dtypeInfo } from "./dtype.ts";
import { unravel } from "./_test_model.ts";

/** Bump allocator over one ArrayBuffer: byte offsets are not 0. */
export class BumpAllocator extends AllocatorBase<ArrayBuffer, number> {
  readonly device: Device = Device.cpu();
  readonly memory: ArrayBuffer;
  next = 8;
  live = new Map<number, number>();
  constructor(byteLength = 1 << 20) {
    super();
    this.memory = new ArrayBuffer(byteLength);
  }
  allocate(byteLength: number): DataPtr<ArrayBuffer, number> {
    const at = this.next;
    if (at + byteLength > this.memory.byteLength) throw new RangeError("full");
    this.next = at + Math.ceil((byteLength + 1) / 8) * 8;
    new Uint8Array(this.memory, at, byteLength).fill(0xcd);
    this.live.set(at, byteLength);
    return new DataPtr(this.memory, at, byteLength, this.device, {
      context: at,
      deleter: (c) => {
        if (!this.live.delete(c)) throw new Error(`double free at ${c}`);
      },
    });
  }
}

/** Memory the host cannot read directly (stands in for a GPUBuffer). */
export class FakeDeviceMemory {
  constructor(readonly bytes: Uint8Array) {}
}

export class FakeDeviceAllocator
  extends AllocatorBase<FakeDeviceMemory, FakeDeviceMemory> {
  readonly device: Device = new Device("webgpu", 0);
  live = 0;
  allocate(byteLength: number): DataPtr<FakeDeviceMemory, FakeDeviceMemory> {
    const memory = new FakeDeviceMemory(new Uint8Array(byteLength));
    this.live++;
    return new DataPtr(memory, 0, byteLength, this.device, {
      context: memory,
      deleter: () => {
        this.live--;
      },
    });
  }
  override copyData(
    dest: DataPtr<FakeDeviceMemory>,
    src: DataPtr<FakeDeviceMemory>,
    byteLength: number,
  ): void {
    dest.memory.bytes.set(src.memory.bytes.subarray(0, byteLength));
  }
}

function arrayOf(b: StridedBinding): AnyTypedArray {
  const info = dtypeInfo(b.dtype);
  const bytes = (b.storage.data.memory as FakeDeviceMemory).bytes;
  return new info.arrayType(
    bytes.buffer as ArrayBuffer,
    bytes.byteOffset,
    Math.floor(bytes.byteLength / info.bytesPerElement),
  );
}

/** A naive element-by-element backend over FakeDeviceMemory. */
export class FakeBackend implements BufferBackend {
  readonly name = "fake";
  calls: string[] = [];
  copy(dst: StridedBinding, src: StridedBinding): void {
    this.calls.push("copy");
    const d = arrayOf(dst), s = arrayOf(src);
    const values: number[] = [];
    for (let f = 0; f < src.view.length; f++) {
      values.push(s[src.view.index(unravel(f, src.view.shape))] as number);
    }
    for (let f = 0; f < dst.view.length; f++) {
      d[dst.view.index(unravel(f, dst.view.shape))] = values[f];
    }
  }
  fill(dst: StridedBinding, value: number): void {
    this.calls.push("fill");
    const d = arrayOf(dst);
    for (let f = 0; f < dst.view.length; f++) {
      d[dst.view.index(unravel(f, dst.view.shape))] = value;
    }
  }
  write(dst: StridedBinding, data: AnyTypedArray): void {
    this.calls.push("write");
    (arrayOf(dst) as Uint8Array).set(data as Uint8Array, dst.view.offset);
  }
  read(src: StridedBinding): Promise<AnyTypedArray> {
    this.calls.push("read");
    const s = arrayOf(src);
    const out = new (dtypeInfo(src.dtype).arrayType)(src.view.length);
    for (let f = 0; f < src.view.length; f++) {
      out[f] = s[src.view.index(unravel(f, src.view.shape))] as number;
    }
    return Promise.resolve(out);
  }
}

/** Bump allocator inside one WebAssembly.Memory, 16-byte aligned. */
export class WasmBumpAllocator
  extends AllocatorBase<WebAssembly.Memory, number> {
  readonly device: Device = Device.cpu();
  readonly memory: WebAssembly.Memory;
  next = 16;
  live = 0;
  constructor(pages = 64) {
    super();
    this.memory = new WebAssembly.Memory({ initial: pages });
  }
  allocate(byteLength: number): DataPtr<WebAssembly.Memory, number> {
    const at = this.next;
    this.next = at + Math.ceil((byteLength + 1) / 16) * 16;
    if (this.next > this.memory.buffer.byteLength) {
      this.memory.grow(
        Math.ceil((this.next - this.memory.buffer.byteLength) / 65536),
      );
    }
    this.live++;
    return new DataPtr(this.memory, at, byteLength, this.device, {
      context: at,
      deleter: () => {
        this.live--;
      },
    });
  }
}
