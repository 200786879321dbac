// A naive reference for strided views: a logical tensor kept as a shape and a
// flat row-major list of storage indices. Every operation is written from its
// definition (enumerate output indices, map each to an input index), with no
// strides involved.

export interface Model {
  shape: number[];
  data: number[];
}

export function count(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function unravel(flat: number, shape: readonly number[]): number[] {
  const idx = new Array<number>(shape.length);
  for (let i = shape.length - 1; i >= 0; i--) {
    idx[i] = flat % shape[i];
    flat = Math.floor(flat / shape[i]);
  }
  return idx;
}

export function ravel(
  idx: readonly number[],
  shape: readonly number[],
): number {
  let flat = 0;
  for (let i = 0; i < shape.length; i++) flat = flat * shape[i] + idx[i];
  return flat;
}

function build(shape: number[], at: (idx: number[]) => number): Model {
  const n = count(shape);
  const data = new Array<number>(n);
  for (let f = 0; f < n; f++) data[f] = at(unravel(f, shape));
  return { shape, data };
}

export function modelOf(shape: number[], offset = 0): Model {
  return {
    shape,
    data: Array.from({ length: count(shape) }, (_, i) => i + offset),
  };
}

export function permute(m: Model, axes: number[]): Model {
  const shape = axes.map((a) => m.shape[a]);
  return build(shape, (idx) => {
    const src = new Array<number>(m.shape.length);
    axes.forEach((a, i) => (src[a] = idx[i]));
    return m.data[ravel(src, m.shape)];
  });
}

export function transpose(m: Model, a: number, b: number): Model {
  const axes = m.shape.map((_, i) => i);
  axes[a] = b;
  axes[b] = a;
  return permute(m, axes);
}

export function slice(
  m: Model,
  dim: number,
  start: number,
  stop: number,
  step: number,
): Model {
  const picked: number[] = [];
  if (step > 0) { for (let i = start; i < stop; i += step) picked.push(i); }
  else for (let i = start; i > stop; i += step) picked.push(i);
  const shape = m.shape.slice();
  shape[dim] = picked.length;
  return build(shape, (idx) => {
    const src = idx.slice();
    src[dim] = picked[idx[dim]];
    return m.data[ravel(src, m.shape)];
  });
}

export function broadcast(m: Model, target: number[]): Model {
  const lead = target.length - m.shape.length;
  return build(target.slice(), (idx) => {
    const src = m.shape.map((n, i) => (n === 1 ? 0 : idx[lead + i]));
    return m.data[ravel(src, m.shape)];
  });
}

export function reshape(m: Model, shape: number[]): Model {
  return { shape: shape.slice(), data: m.data.slice() };
}
