/**
 * A `GPUDevice` stand-in for the conformance suite, written as a user of
 * `@allot/webgpu` would write one: limits, error scopes, `createBuffer`,
 * `destroy`, `lost`, and a queue whose `onSubmittedWorkDone()` resolves once
 * the work submitted before it is done (at once here: nothing runs). Buffers
 * hold no bytes; `live` counts those not destroyed.
 *
 * @module
 */

/** A mock device and the buffers it made that are not destroyed. */
export interface MockGpu {
  readonly device: GPUDevice;
  readonly live: Set<{ size: number }>;
}

/** Makes a mock device (offset alignment 256, 256 MiB buffers at most). */
export function mockGpu(): MockGpu {
  const live = new Set<{ size: number }>();
  const queue = {
    label: "mock queue",
    submit(): void {},
    writeBuffer(): void {},
    onSubmittedWorkDone: (): Promise<undefined> => Promise.resolve(undefined),
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
    popErrorScope: (): Promise<null> => Promise.resolve(null),
    createBuffer(d: { size: number; usage: number; label?: string }) {
      const buffer = {
        size: d.size,
        usage: d.usage,
        label: d.label ?? "",
        destroy(): void {
          live.delete(buffer);
        },
      };
      live.add(buffer);
      return buffer;
    },
    destroy(): void {},
  };
  return { device: device as unknown as GPUDevice, live };
}
