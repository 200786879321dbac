/**
 * Internal: WebGPU's flag values, fixed by the specification. Using them
 * instead of the `GPUBufferUsage`, `GPUMapMode` and `GPUShaderStage` globals
 * lets the package load where an implementation does not install those
 * globals (such as the `webgpu` npm package on Node without its `globals`).
 *
 * @module
 */

/** `GPUBufferUsage` values. */
export const _Usage = Object.freeze({
  MAP_READ: 0x0001,
  MAP_WRITE: 0x0002,
  COPY_SRC: 0x0004,
  COPY_DST: 0x0008,
  UNIFORM: 0x0040,
  STORAGE: 0x0080,
});

/** `GPUMapMode` values. */
export const _MapMode = Object.freeze({ READ: 0x0001, WRITE: 0x0002 });

/** `GPUShaderStage.COMPUTE`. */
export const _COMPUTE_STAGE = 0x4;
