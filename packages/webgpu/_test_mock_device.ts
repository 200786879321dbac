/**
 * Test-only: a `GPUDevice` stand-in with the parts allot's GPU allocators
 * touch (limits, error scopes, `createBuffer`, `destroy`, `lost`, a queue
 * whose `onSubmittedWorkDone()` resolves when the test says the GPU is
 * done), for model tests at thousands of runs where a real device
 * (llvmpipe here) allows a few. Buffers hold no bytes.
 *
 * @module
 */

/** A mock buffer: size and usage, no bytes. */
export interface MockGpuBuffer {
  readonly size: number;
  readonly usage: number;
  readonly label: string;
  destroyed: boolean;
  destroy(): void;
}

/** The mock device and its controls. */
export interface MockGpu {
  /** Pass it where a `GPUDevice` goes. */
  readonly device: GPUDevice;
  /** Buffers made and not destroyed. */
  readonly live: Set<MockGpuBuffer>;
  /** Whether the queue has work not yet done. */
  readonly busy: boolean;
  /** Finishes the work submitted so far (resolves `onSubmittedWorkDone()`). */
  complete(): void;
}

/** Makes a mock device (alignment 256, 256 MiB buffers at most). */
export function mockGpu(): MockGpu {
  const live = new Set<MockGpuBuffer>();
  let waiting: (() => void)[] = [];
  let inFlight = 0;
  const queue = {
    label: "mock queue",
    submit(): void {
      inFlight++;
    },
    writeBuffer(): void {},
    // resolves when the test completes the work submitted so far (at once
    // when nothing is in flight)
    onSubmittedWorkDone(): Promise<undefined> {
      if (inFlight === 0) return Promise.resolve(undefined);
      return new Promise((resolve) => waiting.push(() => resolve(undefined)));
    },
  };
  const device = {
    label: "mock",
    limits: {
      minStorageBufferOffsetAlignment: 256,
      maxBufferSize: 256 * 2 ** 20,
      maxStorageBufferBindingSize: 128 * 2 ** 20,
    },
    queue,
    lost: new Promise(() => {}),
    pushErrorScope(): void {},
    popErrorScope(): Promise<null> {
      return Promise.resolve(null);
    },
    createBuffer(d: { size: number; usage: number; label?: string }) {
      const buffer: MockGpuBuffer = {
        size: d.size,
        usage: d.usage,
        label: d.label ?? "",
        destroyed: false,
        destroy() {
          if (!this.destroyed) live.delete(this);
          this.destroyed = true;
        },
      };
      live.add(buffer);
      return buffer;
    },
    destroy(): void {},
  };
  return {
    device: device as unknown as GPUDevice,
    live,
    get busy() {
      return inFlight > 0;
    },
    complete() {
      inFlight = 0;
      const w = waiting;
      waiting = [];
      for (const f of w) f();
    },
  };
}

/**
 * {@linkcode mockGpu} with the uniform limits a real device has (256-byte
 * uniform offsets, 64 KiB uniform bindings), for tests that make uniform
 * pools.
 */
export function mockGpuWithUniforms(): MockGpu {
  const gpu = mockGpu();
  Object.assign(gpu.device.limits as unknown as Record<string, number>, {
    minUniformBufferOffsetAlignment: 256,
    maxUniformBufferBindingSize: 64 * 1024,
  });
  return gpu;
}
