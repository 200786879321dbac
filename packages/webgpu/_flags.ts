/**
 * Internal: WebGPU's flag values, fixed by the specification. Using them
 * instead of the `GPUBufferUsage`, `GPUMapMode` and `GPUShaderStage` globals
 * lets the package load where an implementation does not install those
 * globals (such as the `webgpu` npm package on Node without its `globals`).
 *
 * @module
 */

/** `GPUBufferUsage` values, in bit order. */
export const _Usage = Object.freeze({
  MAP_READ: 0x0001,
  MAP_WRITE: 0x0002,
  COPY_SRC: 0x0004,
  COPY_DST: 0x0008,
  INDEX: 0x0010,
  VERTEX: 0x0020,
  UNIFORM: 0x0040,
  STORAGE: 0x0080,
  INDIRECT: 0x0100,
  QUERY_RESOLVE: 0x0200,
});

/** The usage of a segment source made without the `usage` option. */
export const _DEFAULT_SEGMENT_USAGE = _Usage.STORAGE | _Usage.COPY_SRC |
  _Usage.COPY_DST;

/** Every `GPUBufferUsage` bit the specification defines. */
export const _KNOWN_USAGE = 0x03ff;

/**
 * The names of the bits of a `GPUBufferUsage` value, lowest first
 * (`"UNIFORM|COPY_DST"` for `0x48`).
 *
 * @param usage A value of known bits.
 * @returns The names joined by `|`.
 */
export function _usageNames(usage: number): string {
  const names: string[] = [];
  for (const [name, bit] of Object.entries(_Usage)) {
    if ((usage & bit) !== 0) names.push(name);
  }
  return names.join("|");
}

/** `GPUMapMode` values. */
export const _MapMode = Object.freeze({ READ: 0x0001, WRITE: 0x0002 });

/** `GPUShaderStage.COMPUTE`. */
export const _COMPUTE_STAGE = 0x4;
