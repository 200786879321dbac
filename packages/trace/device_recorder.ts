import {
  describeValue,
  InvalidArgumentError,
  validateObject,
  validateOptionKeys,
} from "@allot/core";
import { _messageOf } from "./_message.ts";
import { _read } from "./_read_member.ts";
import { TraceRecorder, type TraceRecorderOptions } from "./trace_recorder.ts";

/** The parts of a `GPUBuffer` the recorder touches. */
interface BufferLike {
  readonly size: number;
  readonly usage: number;
  readonly label?: string;
  destroy(): void;
  mapAsync(mode: number, offset?: number, size?: number): Promise<void>;
  unmap(): void;
}

/** The parts of a `GPUDevice` the recorder touches (any WebGPU implementation). */
export interface DeviceLike {
  /** Creates a buffer (recorded). */
  createBuffer(descriptor: GPUBufferDescriptor): GPUBuffer;
  /** The device's queue (its `submit` and `writeBuffer` are recorded). */
  readonly queue: GPUQueue;
}

/** What {@linkcode recordDevice} returns. */
export interface DeviceRecording<D extends DeviceLike> {
  /** The same device object, now recorded: hand it to the runtime. */
  readonly device: D;
  /** Where the events go: set steps and tags here, read the trace from here. */
  readonly recorder: TraceRecorder;
  /** The id the trace uses for a buffer created through the device, or undefined. */
  bufferId(buffer: object): number | undefined;
  /** Stops recording: the device and its queue get their own methods back. */
  stop(): void;
}

/** Options of {@linkcode recordDevice}. */
export interface RecordDeviceOptions extends TraceRecorderOptions {
  /** Record into this recorder instead of a new one. */
  readonly recorder?: TraceRecorder;
}

const PATCHED = ["createBuffer"] as const;

/**
 * Records every `createBuffer`, `destroy`, `mapAsync`, `unmap`,
 * `queue.submit` and `queue.writeBuffer` of a `GPUDevice` (Deno's, the
 * `webgpu` npm package's or a browser's) into a trace, in call order, with
 * size, usage, time, the current step and tag, and the caller's stack.
 *
 * The device is not replaced: its methods (and those of its queue and of the
 * buffers it creates) are shadowed by recording ones on the instances, so the
 * objects a runtime passes back to the native API stay genuine. Errors
 * thrown by the device pass through unchanged (an `error` event notes them).
 *
 * @example Record a device, hand it to a runtime
 * ```ts ignore
 * import { recordDevice } from "@allot/trace";
 * const adapter = await navigator.gpu.requestAdapter();
 * const { device, recorder } = recordDevice(await adapter!.requestDevice());
 * // ... give `device` to TF.js / onnxruntime-web, run, call recorder.step() ...
 * await Deno.writeTextFile("trace.jsonl", recorder.toJsonLines());
 * ```
 */
export function recordDevice<D extends DeviceLike>(
  device: D,
  options: RecordDeviceOptions = {},
): DeviceRecording<D> {
  // each member read once: what is checked is what is called (a getter
  // could answer a function to the check and junk to the call)
  const readCreate = device === null || typeof device !== "object"
    ? undefined
    : _read(device, "createBuffer", "a device") as DeviceLike["createBuffer"];
  if (typeof readCreate !== "function") {
    throw new InvalidArgumentError(
      `Cannot record a device: it must be a GPUDevice, received ${
        describeValue(device)
      }`,
      { name: "device", value: device, limit: "a GPUDevice" },
    );
  }
  const queue = _read(device, "queue", "a device") as GPUQueue;
  const readSubmit = queue === null || typeof queue !== "object"
    ? undefined
    : _read(queue, "submit", "a device's queue") as GPUQueue["submit"];
  const readWrite = typeof readSubmit !== "function"
    ? undefined
    : _read(queue, "writeBuffer", "a device's queue") as GPUQueue[
      "writeBuffer"
    ];
  if (typeof readSubmit !== "function" || typeof readWrite !== "function") {
    throw new InvalidArgumentError(
      `Cannot record a device: its queue must be a GPUQueue, received ${
        describeValue(queue)
      }`,
      { name: "device.queue", value: queue, limit: "a GPUQueue" },
    );
  }
  validateObject(options, "options");
  validateOptionKeys(options, [
    "recorder",
    "source",
    "meta",
    "stacks",
    "capture",
    "now",
  ], "recordDevice()");
  if (
    options.recorder !== undefined &&
    !(options.recorder instanceof TraceRecorder)
  ) {
    throw new InvalidArgumentError(
      `Cannot record a device: recorder must be a TraceRecorder, received ${
        describeValue(options.recorder)
      }`,
      { name: "recorder", value: options.recorder, limit: "a TraceRecorder" },
    );
  }
  if (Object.hasOwn(device, "createBuffer")) {
    throw new InvalidArgumentError(
      "Cannot record a device: it is already recorded (or patched)",
      { name: "device", value: device, limit: "a device not yet recorded" },
    );
  }
  const { recorder: given, ...recorderOptions } = options;
  const recorder = given ?? new TraceRecorder(recorderOptions);
  const ids = new WeakMap<object, number>();
  const destroyed = new WeakSet<object>();
  const origCreate = readCreate;
  const origSubmit = readSubmit;
  const origWrite = readWrite;
  const ownSubmit = Object.hasOwn(queue, "submit");
  const ownWrite = Object.hasOwn(queue, "writeBuffer");
  // A buffer's own methods, read before they are wrapped: a buffer whose
  // methods are its own properties (not its prototype's) keeps working.
  const methods = new WeakMap<object, BufferLike>();
  const method = <K extends "destroy" | "mapAsync" | "unmap">(
    buffer: BufferLike,
    key: K,
  ): BufferLike[K] =>
    (methods.get(buffer) ?? Object.getPrototypeOf(buffer) as BufferLike)[key];

  function note(call: string, err: unknown): void {
    recorder.push(
      {
        op: "error",
        call,
        message: _messageOf(err),
      },
      false,
      1,
    );
  }

  function destroy(this: BufferLike): void {
    try {
      method(this, "destroy").call(this);
    } catch (err) {
      note("destroy", err);
      throw err;
    }
    const id = ids.get(this);
    if (id !== undefined && !destroyed.has(this)) {
      destroyed.add(this);
      recorder.push({ op: "destroy", id }, false);
    }
  }
  function mapAsync(
    this: BufferLike,
    mode: number,
    ...rest: [number?, number?]
  ): Promise<void> {
    const id = ids.get(this);
    if (id !== undefined) {
      const bits = typeof mode === "number" ? mode >>> 0 : 0;
      recorder.push({ op: "map", id, mode: bits }, false);
    }
    let mapped: Promise<void>;
    try {
      mapped = method(this, "mapAsync").call(this, mode, ...rest);
    } catch (err) {
      note("mapAsync", err);
      throw err;
    }
    // A map that fails later (the buffer was destroyed, the device lost) is
    // noted too; the caller still gets the same rejection.
    if (
      mapped === null || typeof mapped !== "object" ||
      typeof mapped.then !== "function"
    ) return mapped;
    return mapped.then(undefined, (err) => {
      note("mapAsync", err);
      throw err;
    });
  }
  function unmap(this: BufferLike): void {
    try {
      method(this, "unmap").call(this);
    } catch (err) {
      note("unmap", err);
      throw err;
    }
    const id = ids.get(this);
    if (id !== undefined) recorder.push({ op: "unmap", id }, false);
  }

  function createBuffer(this: D, descriptor: GPUBufferDescriptor): GPUBuffer {
    let buffer: GPUBuffer;
    try {
      buffer = origCreate.call(this, descriptor);
    } catch (err) {
      note("createBuffer", err);
      throw err;
    }
    // A device that lies (no buffer, a size or usage that is not a count,
    // a buffer that cannot be wrapped) gets an "error" event and its buffer
    // goes unrecorded: the trace stays valid, the runtime gets what the
    // device returned.
    let size: unknown, usage: unknown;
    try {
      if (buffer === null || typeof buffer !== "object") {
        throw new Error(`returned ${describeValue(buffer)}, not a buffer`);
      }
      size = buffer.size;
      usage = buffer.usage;
      for (const [k, v] of [["size", size], ["usage", usage]] as const) {
        if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
          throw new Error(
            `returned a buffer whose ${k} is ${describeValue(v)}`,
          );
        }
      }
      const b = buffer as unknown as BufferLike & Record<string, unknown>;
      const own = {
        destroy: b.destroy,
        mapAsync: b.mapAsync,
        unmap: b.unmap,
      } as BufferLike;
      methods.set(buffer, own);
      b.destroy = destroy;
      b.mapAsync = mapAsync;
      b.unmap = unmap;
    } catch (err) {
      note("createBuffer", err);
      return buffer;
    }
    const id = recorder.nextId();
    ids.set(buffer, id);
    const ev: Record<string, unknown> = { op: "create", id, size, usage };
    try {
      if (descriptor?.label) ev.label = String(descriptor.label);
      if (descriptor?.mappedAtCreation) ev.mapped = true;
    } catch {
      // a descriptor with a throwing label: the device accepted it
    }
    recorder.push(ev as { op: "create" }, true, 1);
    return buffer;
  }

  function submit(this: GPUQueue, commandBuffers: Iterable<GPUCommandBuffer>) {
    let list: unknown = commandBuffers;
    try {
      if (!Array.isArray(list)) list = Array.from(commandBuffers);
    } catch {
      // not iterable: the device says what it thinks of it
    }
    try {
      origSubmit.call(this, list as GPUCommandBuffer[]);
    } catch (err) {
      note("submit", err);
      throw err;
    }
    const count = Array.isArray(list) ? list.length : 0;
    recorder.push({ op: "submit", count }, false);
  }

  function writeBuffer(
    this: GPUQueue,
    buffer: GPUBuffer,
    offset: number,
    ...rest: unknown[]
  ): void {
    try {
      // deno-lint-ignore no-explicit-any
      (origWrite as any).call(this, buffer, offset, ...rest);
    } catch (err) {
      note("writeBuffer", err);
      throw err;
    }
    const id = buffer !== null && typeof buffer === "object"
      ? ids.get(buffer)
      : undefined;
    if (id === undefined) return;
    let at: number, size: number;
    try {
      [at, size] = written(offset, rest);
    } catch (err) {
      note("writeBuffer", err);
      return;
    }
    recorder.push({ op: "write", id, offset: at, size }, false);
  }

  // The offset and byte count of a writeBuffer call the device accepted.
  function written(offset: unknown, rest: unknown[]): [number, number] {
    const data = rest[0] as ArrayBufferView | ArrayBuffer;
    const dataOffset = Number(rest[1] ?? 0);
    const given = rest[2];
    const elem = ArrayBuffer.isView(data) && "BYTES_PER_ELEMENT" in data
      ? (data as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT
      : 1;
    const total = data.byteLength / elem;
    const size = (given === undefined ? total - dataOffset : Number(given)) *
      elem;
    const at = Number(offset);
    for (const v of [at, size]) {
      if (!Number.isSafeInteger(v) || v < 0) {
        throw new Error(
          `accepted a write of ${describeValue(size)} bytes at ${
            describeValue(offset)
          }`,
        );
      }
    }
    return [at, size];
  }

  const d = device as unknown as Record<string, unknown>;
  const q = queue as unknown as Record<string, unknown>;
  const restore = (): void => {
    for (const k of PATCHED) delete d[k];
    // a queue whose methods were its own gets them back, not deleted
    if (ownSubmit) q.submit = origSubmit;
    else delete q.submit;
    if (ownWrite) q.writeBuffer = origWrite;
    else delete q.writeBuffer;
  };
  try {
    d.createBuffer = createBuffer;
    q.submit = submit;
    q.writeBuffer = writeBuffer;
  } catch (error) {
    // a frozen queue (or a method without a setter): the device was left
    // half-recorded for good, and the error was the engine's
    try {
      restore();
    } catch {
      // what could not be set was not set
    }
    throw new InvalidArgumentError(
      `Cannot record a device: its methods cannot be replaced (${
        error instanceof Error ? error.message : "a non-error was thrown"
      }); a frozen device or queue cannot be recorded`,
      {
        name: "device",
        value: device,
        limit: "a device whose methods can be replaced",
      },
      { cause: error },
    );
  }
  let stopped = false;
  return {
    device,
    recorder,
    bufferId: (buffer) => ids.get(buffer),
    stop() {
      if (stopped) return;
      stopped = true;
      restore();
    },
  };
}
