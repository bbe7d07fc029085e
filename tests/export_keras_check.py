#!/usr/bin/env python3
"""export_keras_check.py - loads `ctrain export --format keras` output into the
equivalent Keras 2 model with model.load_weights() and checks that it computes
what ctrain computed. Run by hand (not part of `make test`), in a virtualenv with
tf-keras (Keras 2 on TensorFlow):

    python3 -m venv /tmp/tfk && /tmp/tfk/bin/pip install tf-keras h5py
    bin/ctrain train siamese-lstm --epochs 1 ... --checkpoint run.h5
    bin/ctrain export --format keras run.h5 keras.h5
    bin/ctrain export --format torch run.h5 torch.h5       # only to get ctrain's output, see below
    /tmp/tfk/bin/python tests/export_keras_check.py siamese-lstm keras.h5 IO.h5

IO.h5 holds /x (the input) and /out (ctrain's output for it); the C test
`checkpoint/export` writes one (set CTRAIN_KEEP_EXPORT=DIR to keep its files), or
pass --make-io to compute /out from the torch export with numpy (no torch needed):

    /tmp/tfk/bin/python tests/export_keras_check.py siamese-lstm keras.h5 IO.h5 --make-io torch.h5 --frames 10

The models: siamese-lstm = LSTM(H, recurrent_activation='sigmoid') [one per stacked
layer] -> Dense(D) on the last hidden state (one tower); small-cnn = Conv2D 'same'
-> BatchNormalization(epsilon=1e-5) -> ReLU -> MaxPooling2D(2) -> Flatten -> Dense,
channels last. Exits 0 when the normalised max error is below 1e-5.
"""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")   # tf.keras = Keras 2 (tf-keras)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import h5py
import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_tower(state, x):
    """ctrain's siamese tower in numpy from a torch-layout state_dict (for --make-io)."""
    h_in = x.astype(np.float64)
    k = 0
    while f"lstm.weight_ih_l{k}" in state:
        wih, whh = state[f"lstm.weight_ih_l{k}"], state[f"lstm.weight_hh_l{k}"]
        b = state[f"lstm.bias_ih_l{k}"] + state[f"lstm.bias_hh_l{k}"]
        H = whh.shape[1]
        S, T, _ = h_in.shape
        h = np.zeros((S, H)); c = np.zeros((S, H)); outs = []
        for t in range(T):
            z = h_in[:, t, :] @ wih.T + h @ whh.T + b
            i, f, g, o = sigmoid(z[:, :H]), sigmoid(z[:, H:2 * H]), np.tanh(z[:, 2 * H:3 * H]), sigmoid(z[:, 3 * H:])
            c = f * c + i * g
            h = o * np.tanh(c)
            outs.append(h)
        h_in = np.stack(outs, 1)
        k += 1
    return (h_in[:, -1, :] @ state["dense.weight"].T + state["dense.bias"]).astype(np.float32)


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        print(__doc__)
        sys.exit(2)
    model, weights, io = args[:3]
    with h5py.File(weights, "r") as f:
        names = [n.decode() if isinstance(n, bytes) else n for n in f.attrs["layer_names"]]
        shapes = {n: [f[n][w].shape for w in f[n].attrs["weight_names"]] for n in names}
        print("keras file:", {k: v for k, v in f.attrs.items()}, shapes)
    if "--make-io" in args:
        torch_path = args[args.index("--make-io") + 1]
        frames = int(args[args.index("--frames") + 1]) if "--frames" in args else 10
        with h5py.File(torch_path, "r") as f:
            state = {k: np.array(f[k][()], dtype=np.float64) for k in f.keys()}
        if model != "siamese-lstm":
            print("--make-io supports siamese-lstm only")
            sys.exit(2)
        rng = np.random.default_rng(0)
        x = rng.uniform(-2, 2, (5, frames, state["lstm.weight_ih_l0"].shape[1])).astype(np.float32)
        with h5py.File(io, "w") as f:
            f["x"] = x
            f["out"] = numpy_tower(state, x)

    import tensorflow as tf
    from tensorflow import keras
    with h5py.File(io, "r") as f:
        x = np.array(f["x"], dtype=np.float32)
        ref = np.array(f["out"], dtype=np.float32)
    if model == "siamese-lstm":
        lstm_layers = [n for n in names if n.startswith("lstm")]
        inp = keras.Input(shape=(x.shape[1], x.shape[2]))
        h = inp
        for i, n in enumerate(lstm_layers):
            units = shapes[n][1][0]
            h = keras.layers.LSTM(units, recurrent_activation="sigmoid", return_sequences=i + 1 < len(lstm_layers), name=n)(h)
        out = keras.layers.Dense(shapes["dense_1"][0][1], name="dense_1")(h)
        net = keras.Model(inp, out)
    elif model == "small-cnn":
        xk = np.transpose(x, (0, 2, 3, 1))           # NCHW -> NHWC
        kh, kw, cin, filters = shapes["conv2d_1"][0]
        inp = keras.Input(shape=xk.shape[1:])
        h = keras.layers.Conv2D(filters, (kh, kw), padding="same", name="conv2d_1")(inp)
        h = keras.layers.BatchNormalization(epsilon=1e-5, name="batch_normalization_1")(h)
        h = keras.layers.ReLU()(h)
        h = keras.layers.MaxPooling2D(2)(h)
        h = keras.layers.Flatten()(h)
        out = keras.layers.Dense(shapes["dense_1"][0][1], name="dense_1")(h)
        net = keras.Model(inp, out)
        x = xk
    else:
        print("unknown model", model)
        sys.exit(2)
    net.load_weights(weights)
    got = net.predict(x, verbose=0)
    err = float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-6))
    ok = err < 1e-5
    try:
        import tf_keras
        kv = tf_keras.__version__
    except (ImportError, AttributeError):
        kv = getattr(keras, "__version__", "?")
    print(f"{'OK' if ok else 'FAIL'}: {model}: Keras {kv} (TensorFlow {tf.__version__}) load_weights, "
          f"output {got.shape}, normalised max error vs ctrain {err:.2e} (tolerance 1e-5)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
