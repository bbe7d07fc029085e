#!/usr/bin/env python3
"""export_keras_check.py - checks `ctrain export --format keras` output: the
equivalent Keras 2 model, given the file's weights, must compute what ctrain
computed.

    export_keras_check.py MODEL KERAS.h5 IO.h5 --numpy      (make test: numpy and h5py only)
    export_keras_check.py MODEL KERAS.h5 IO.h5              (by hand: Keras itself, see below)

MODEL is siamese-lstm, small-cnn, cnn or siamese-cnn. IO.h5 holds /x (the input,
in ctrain's layout) and /out (ctrain's output for it); the C test `checkpoint/export`
writes one (set CTRAIN_KEEP_EXPORT=DIR to keep its files).

--numpy computes the Keras model's output from the Keras file alone, with Keras's
own conventions written out in numpy: the weights of each layer in layer_names
order as weight_names lists them, channels-last images [N, H, W, C], Conv2D
kernels [KH, KW, C, F], Dense kernels [in, units] applied as x @ kernel + bias,
Flatten of [H, W, C] in that order (so a dense layer after a flatten sees Keras's
order, not ctrain's channel-major one), BatchNormalization(epsilon=1e-5) on the
last axis, an LSTM's single bias, gates i, f, c, o. A layout error in the export
(a kernel not transposed, rows not reordered for the flatten) makes it disagree
with ctrain. The architecture comes from the file's root attributes, which ctrain
writes: "arch" (cnn, siamese-cnn), "pool" and "recurrent" (siamese-lstm).

Without --numpy the same model is built in tf.keras and given the file with
model.load_weights(), in a virtualenv with tf-keras (Keras 2 on TensorFlow):

    python3 -m venv /tmp/tfk && /tmp/tfk/bin/pip install tf-keras h5py
    /tmp/tfk/bin/python tests/export_keras_check.py siamese-lstm keras.h5 IO.h5

Exits 0 when the normalised max error is below 1e-5, 1 when not, 2 on bad use.
"""
import os
import re
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")   # tf.keras = Keras 2 (tf-keras)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

try:
    import h5py
    import numpy as np
except ImportError as e:  # never pass without checking
    print(f"FAIL: {e}: install Debian's python3-h5py (apt-get install python3-h5py)")
    sys.exit(2)


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def read_keras(path):
    """[(layer name, [weights in weight_names order])] of the layers with weights, and the root attributes."""
    with h5py.File(path, "r") as f:
        attrs = {k: f.attrs[k] for k in f.attrs}
        layers = []
        for name in (text(n) for n in f.attrs["layer_names"]):
            names = [text(w) for w in f[name].attrs["weight_names"]]
            if names:
                layers.append((name, [np.array(f[name][w], dtype=np.float64) for w in names]))
    return layers, attrs


# ---- Keras's layers in numpy (channels last) ----
def conv2d(x, kernel, bias, stride, pad):
    """x [N, H, W, C] (zero-padded by pad: ZeroPadding2D then a 'valid' Conv2D), kernel [KH, KW, C, F]."""
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    n, h, w, _ = x.shape
    kh, kw, _, f = kernel.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    out = np.zeros((n, oh, ow, f))
    for i in range(kh):
        for j in range(kw):
            out += x[:, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride, :] @ kernel[i, j]
    return out + bias


def maxpool(x, k, s):
    n, h, w, c = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.full((n, oh, ow, c), -np.inf)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, x[:, i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s, :])
    return out


def spec_forward(spec, layers, x):
    """ctrain's spec as the Keras model it corresponds to, the weighted layers taken in order;
    a residual block (save ... add) is Keras's Add() of the block's input and output."""
    it, kept = iter(layers), []
    for tok in spec.split(","):
        m = re.fullmatch(r"conv(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?", tok)
        if m:
            _, (kernel, bias) = next(it)
            x = conv2d(x, kernel, bias, int(m[3] or 1), int(m[4] or 0))
        elif tok.startswith("dense"):
            _, (kernel, bias) = next(it)
            x = x @ kernel + bias
        elif tok == "batchnorm":
            _, (gamma, beta, mean, var) = next(it)
            x = (x - mean) / np.sqrt(var + 1e-5) * gamma + beta
        elif tok.startswith("maxpool"):
            m = re.fullmatch(r"maxpool(\d+)(?:s(\d+))?", tok)
            x = maxpool(x, int(m[1]), int(m[2] or m[1]))
        elif tok == "flatten":                      # Flatten(): [N, H, W, C] in that order
            x = x.reshape(len(x), -1)
        elif tok == "gap":                          # GlobalAveragePooling2D()
            x = x.mean(axis=(1, 2))
        elif tok == "gaph":                         # Lambda(mean over H), then Flatten(): [N, W, C]
            x = x.mean(axis=1).reshape(len(x), -1)
        elif tok == "relu":
            x = np.maximum(x, 0)
        elif tok == "tanh":
            x = np.tanh(x)
        elif tok == "sigmoid":
            x = 1 / (1 + np.exp(-x))
        elif tok == "save":
            kept.append(x)
        elif tok == "add":
            x = x + kept.pop()
        elif not tok.startswith("dropout"):
            raise ValueError(f"unknown layer {tok}")
    return x


def lstm_forward(layers, attrs, x):
    """LSTM layers (kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H]), then a Dense on the last
    hidden state or the mean over time."""
    hard = text(attrs.get("recurrent", "sigmoid")) == "hard_sigmoid"
    r = (lambda z: np.clip(0.2 * z + 0.5, 0, 1)) if hard else (lambda z: 1 / (1 + np.exp(-z)))
    h_in = x
    for _, (kernel, rec, bias) in layers[:-1]:
        hid = rec.shape[0]
        h = np.zeros((len(x), hid))
        c = np.zeros((len(x), hid))
        outs = []
        for t in range(x.shape[1]):
            z = h_in[:, t, :] @ kernel + h @ rec + bias
            i, f, g, o = r(z[:, :hid]), r(z[:, hid:2 * hid]), np.tanh(z[:, 2 * hid:3 * hid]), r(z[:, 3 * hid:])
            c = f * c + i * g
            h = o * np.tanh(c)
            outs.append(h)
        h_in = np.stack(outs, 1)
    pooled = h_in.mean(axis=1) if text(attrs.get("pool", "last")) == "mean" else h_in[:, -1, :]
    kernel, bias = layers[-1][1]
    return pooled @ kernel + bias


def numpy_keras(model, layers, attrs, x):
    if model == "siamese-lstm":
        return lstm_forward(layers, attrs, x)
    if model == "small-cnn":
        kernel = layers[0][1][0]
        spec = f"conv{kernel.shape[3]}k{kernel.shape[0]}p{kernel.shape[0] // 2},batchnorm,relu,maxpool2,flatten,dense"
        return spec_forward(spec, layers, np.transpose(x, (0, 2, 3, 1)))
    if model == "cnn":
        return spec_forward(text(attrs["arch"]), layers, np.transpose(x, (0, 2, 3, 1)))   # NCHW -> NHWC
    if model == "siamese-cnn":
        return spec_forward(text(attrs["arch"]), layers, x[..., None])   # crops [S, T, I] -> images [S, T, I, 1]
    raise ValueError(f"unknown model {model}")


def tf_keras(model, layers, attrs, weights, x):
    """The same model in tf.keras, loaded with load_weights (by hand: needs tf-keras)."""
    from tensorflow import keras
    names = [n for n, _ in layers]
    if model == "siamese-lstm":
        inp = keras.Input(shape=x.shape[1:])
        h = inp
        lstm = names[:-1]
        for i, n in enumerate(lstm):
            h = keras.layers.LSTM(layers[i][1][1].shape[0], recurrent_activation=text(attrs.get("recurrent", "sigmoid")),
                                  return_sequences=i + 1 < len(lstm) or text(attrs.get("pool", "last")) == "mean", name=n)(h)
        if text(attrs.get("pool", "last")) == "mean":
            h = keras.layers.GlobalAveragePooling1D()(h)
        out = keras.layers.Dense(layers[-1][1][0].shape[1], name=names[-1])(h)
        net = keras.Model(inp, out)
    else:
        spec = text(attrs["arch"]) if model != "small-cnn" else None
        if spec is None:
            k = layers[0][1][0]
            spec = f"conv{k.shape[3]}k{k.shape[0]}p{k.shape[0] // 2},batchnorm,relu,maxpool2,flatten,dense"
        x = np.transpose(x, (0, 2, 3, 1)) if model != "siamese-cnn" else x[..., None]
        inp = keras.Input(shape=x.shape[1:])
        h, it, kept = inp, iter(names), []
        for tok in spec.split(","):
            m = re.fullmatch(r"conv(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?", tok)
            if m:
                if int(m[4] or 0):
                    h = keras.layers.ZeroPadding2D(int(m[4]))(h)
                h = keras.layers.Conv2D(int(m[1]), int(m[2]), strides=int(m[3] or 1), name=next(it))(h)
            elif tok.startswith("dense"):
                n = next(it)
                h = keras.layers.Dense(dict(layers)[n][0].shape[1], name=n)(h)
            elif tok == "batchnorm":
                h = keras.layers.BatchNormalization(epsilon=1e-5, name=next(it))(h)
            elif tok.startswith("maxpool"):
                m = re.fullmatch(r"maxpool(\d+)(?:s(\d+))?", tok)
                h = keras.layers.MaxPooling2D(int(m[1]), strides=int(m[2] or m[1]))(h)
            elif tok == "flatten":
                h = keras.layers.Flatten()(h)
            elif tok == "gap":
                h = keras.layers.GlobalAveragePooling2D()(h)
            elif tok == "gaph":
                h = keras.layers.Flatten()(keras.layers.Lambda(lambda t: keras.backend.mean(t, axis=1))(h))
            elif tok in ("relu", "tanh", "sigmoid"):
                h = keras.layers.Activation(tok)(h)
            elif tok == "save":
                kept.append(h)
            elif tok == "add":
                h = keras.layers.Add()([h, kept.pop()])
        net = keras.Model(inp, h)
    net.load_weights(weights)
    return net.predict(x, verbose=0), f"Keras {getattr(keras, '__version__', '?')} load_weights"


def main():
    args = sys.argv[1:]
    if len(args) < 3:
        print(__doc__)
        sys.exit(2)
    model, weights, io = args[:3]
    layers, attrs = read_keras(weights)
    with h5py.File(io, "r") as f:
        x = np.array(f["x"], dtype=np.float64)
        ref = np.array(f["out"], dtype=np.float64)
    if "--numpy" in args:
        got, how = numpy_keras(model, layers, attrs, x), "Keras's conventions in numpy"
    else:
        got, how = tf_keras(model, layers, attrs, weights, x.astype(np.float32))
    if got.shape != ref.shape:
        print(f"FAIL: {model}: Keras output shape {got.shape}, ctrain's {ref.shape}")
        sys.exit(1)
    err = float(np.max(np.abs(got - ref)) / max(float(np.max(np.abs(ref))), 1e-6))
    ok = err < 1e-5
    print(f"{'OK' if ok else 'FAIL'}: {model}: {how}, {len(layers)} layers with weights, output {got.shape}, "
          f"normalised max error vs ctrain {err:.2e} (tolerance 1e-5)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
