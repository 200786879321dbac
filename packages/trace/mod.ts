/**
 * `@allot/trace`: see GPU memory. Record any WebGPU device (and a runtime's
 * buffer pool) into a versioned JSON Lines trace, validate and replay it
 * through allot's policies and the runtimes' own, and draw it.
 *
 * @example Record a device and read the trace back
 * ```ts
 * import { parseTrace, recordDevice } from "@allot/trace";
 * import assert from "node:assert/strict";
 *
 * const adapter = await navigator.gpu?.requestAdapter();
 * if (adapter) {
 *   const { device, recorder, stop } = recordDevice(await adapter.requestDevice());
 *   recorder.step("load");
 *   const b = recorder.withTag("weights", () =>
 *     device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE }));
 *   b.destroy();
 *   stop();
 *   const trace = parseTrace(recorder.toJsonLines());
 *   assert.deepEqual(trace.events.filter((e) => e.op !== "stack").map((e) => e.op),
 *     ["step", "create", "destroy"]);
 *   device.destroy();
 * }
 * ```
 *
 * @module
 */

export * from "./trace_format.ts";
export * from "./trace_error.ts";
export { isFrameKind, parseTrace, validateTrace } from "./parse_trace.ts";
export * from "./frame_kind.ts";
export * from "./trace_recorder.ts";
export * from "./device_recorder.ts";
export * from "./pool_recorder.ts";
export * from "./replay_policy.ts";
export * from "./baseline_policies.ts";
export * from "./allot_policies.ts";
export * from "./replay.ts";
export { formatReplay } from "./replay_table.ts";
export * from "./memory_timeline.ts";
export * from "./timeline_svg.ts";
export * from "./report_html.ts";
export * from "./report.ts";
export * from "./allocator_history.ts";
