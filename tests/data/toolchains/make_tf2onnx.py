"""A Keras GRU exported by tf2onnx at its defaults (`tf2onnx.convert.from_keras`): the recurrence becomes a `Loop`
stopped by its own condition (`i < max_iterations and i < time_steps`), its stacked outputs a scan output whose
length only the run knows. Seeded weights, 8 features, 16 units, a Dense head of 4.

- tf2onnx_gru.onnx

usage: python make_tf2onnx.py OUT_DIR      (run through make.sh, which makes the locked environment)
"""
import os
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402


def main(out):
    tf.keras.utils.set_random_seed(0)
    x = tf.keras.Input(shape=(None, 8), name="x")
    h = tf.keras.layers.GRU(16, return_sequences=True)(x)
    model = tf.keras.Model(x, tf.keras.layers.Dense(4)(h))
    spec = (tf.TensorSpec((None, None, 8), tf.float32, name="x"),)
    tf2onnx.convert.from_keras(model, input_signature=spec, output_path=os.path.join(out, "tf2onnx_gru.onnx"))


if __name__ == "__main__":
    main(sys.argv[1])
