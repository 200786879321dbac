/**
 * Internal: the device of every `GPUBuffer` allot's segment sources made, so
 * a range of one device's buffer handed to another device's kernels or
 * staging is refused with a typed error instead of a WebGPU validation error
 * on the device.
 *
 * @module
 */

const devices = new WeakMap<GPUBuffer, GPUDevice>();

/** Records that `buffer` belongs to `device`. */
export function _recordBufferDevice(
  buffer: GPUBuffer,
  device: GPUDevice,
): void {
  devices.set(buffer, device);
}

/** The device allot made `buffer` on, or `undefined` when not allot's. */
export function _bufferDevice(buffer: GPUBuffer): GPUDevice | undefined {
  return devices.get(buffer);
}
