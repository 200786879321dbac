/** A small workload added for the CPU traces (random weights, nothing downloaded). */
import type { TfjsRecording } from "./_tfjs.ts";
import { tf } from "./_tfjs.ts";

/**
 * A 4-layer MLP trained with tf.variableGrads and Adam over batches whose
 * size changes (an epoch's last batch is short), then evaluated.
 */
export async function mlpTraining(
  rec: TfjsRecording,
  opts = {
    widths: [256, 512, 512, 128, 10],
    batches: [64, 64, 64, 17, 32, 64, 5],
  },
): Promise<void> {
  const tag = (t: string | undefined) => rec.recording.recorder.setTag(t);
  tag("weights");
  // Each variable's initial value is disposed once the variable holds it.
  const ws = opts.widths.slice(1).map((w, i) => {
    const init = tf.randomNormal([opts.widths[i], w], 0, 0.05, "float32", i);
    const v = tf.variable(init);
    init.dispose();
    return v;
  });
  const bs = opts.widths.slice(1).map((w) => tf.variable(tf.zeros([w])));
  const opt = tf.train.adam(1e-3);
  rec.step("weights");
  const forward = (x: tf.Tensor) => {
    let h = x;
    ws.forEach((w, i) => {
      h = tf.add(
        tf.matMul(h as tf.Tensor2D, w as unknown as tf.Tensor2D),
        bs[i],
      );
      if (i < ws.length - 1) h = tf.relu(h);
    });
    return h;
  };
  for (const [s, batch] of opts.batches.entries()) {
    tag("batch");
    const x = tf.randomNormal([batch, opts.widths[0]]);
    const labels = tf.oneHot(
      tf.randomUniform([batch], 0, 10, "int32") as tf.Tensor1D,
      10,
    );
    tag("forward+backward");
    const loss = tf.tidy(() => {
      const { value, grads } = tf.variableGrads(() =>
        tf.losses.softmaxCrossEntropy(labels, forward(x)) as tf.Scalar
      );
      tag("optimizer");
      opt.applyGradients(grads as tf.NamedTensorMap as never);
      return value;
    });
    tag("readback");
    await loss.data();
    tf.dispose([loss, x, labels]);
    tag(undefined);
    rec.step(`step ${s} (batch ${batch})`);
  }
  tag("eval");
  const x = tf.randomNormal([100, opts.widths[0]]);
  const pred = tf.tidy(() => tf.argMax(forward(x), 1));
  await pred.data();
  tf.dispose([x, pred]);
  tag(undefined);
  rec.step("eval");
  opt.dispose();
  tf.dispose([...ws, ...bs]);
  rec.step("disposed");
}
