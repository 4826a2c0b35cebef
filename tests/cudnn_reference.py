"""Float64 reference for the CudnnRNN op family (docs/SEMANTICS.md §4), written with eager
TensorFlow ops so that tf.GradientTape gives reference gradients.  Independent of tf_rnn_ops.

Notation: T time steps, B batch, I input_size, H num_units, L num_layers, D directions (1 or 2),
P num_proj (0 = none; lstm only), Hs = P or H (width of h), K gates (lstm 4 (i, f, c', o),
gru 3 (r, z, h'), rnn 1).

Opaque params layout (ours; equal to cuDNN's for one unidirectional layer).  For each
pseudo-layer p = l*D + d (L0-fwd, L0-bwd, L1-fwd, ...):

    W_0 .. W_{K-1}    [H, in_l] each, row-major   (absent for layer 0 with skip input)
    R_0 .. R_{K-1}    [H, Hs] each
    Pm                [P, H]                        (lstm with P > 0)
    bW_0 .. bW_{K-1}  [H] each
    bR_0 .. bR_{K-1}  [H] each

in_0 = I, in_l = D*Hs for l > 0.

Canonical lists (ParamsToCanonical outputs, CanonicalToParams inputs), §4.2:
weights = per pseudo-layer W_0..W_{K-1}, R_0..R_{K-1} ([H, width] each; skip-input layer-0
input matrices are empty [H, 0]), then Pm (V2 with P); biases = per pseudo-layer
bW_0..bW_{K-1}, bR_0..bR_{K-1}.
"""

import numpy as np
import tensorflow as tf

MODES = ("rnn_relu", "rnn_tanh", "lstm", "gru")
INPUT_MODES = ("linear_input", "skip_input", "auto_select")
DIRECTIONS = ("unidirectional", "bidirectional")

F64 = tf.float64


def num_gates(mode):
    return {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}[mode]


def num_dirs(direction):
    return {"unidirectional": 1, "bidirectional": 2}[direction]


def resolve_input_mode(input_mode, input_size, num_units):
    """'linear_input' or 'skip_input' (auto_select: skip iff I == H)."""
    if input_mode == "auto_select":
        return "skip_input" if input_size == num_units else "linear_input"
    return input_mode


def _dims(mode, num_units, input_size, input_mode, direction, num_proj):
    """K (gates), D (directions), H, P, Hs (the state's width: P if projected, else H) and
    whether layer 0 skips the input matrices."""
    K, D, H, P = num_gates(mode), num_dirs(direction), num_units, num_proj
    skip = resolve_input_mode(input_mode, input_size, num_units) == "skip_input"
    return K, D, H, P, (P if P else H), skip


def layer_specs(*, mode, num_layers, num_units, input_size, input_mode="linear_input",
                direction="unidirectional", num_proj=0):
    """One dict per pseudo-layer: K, H, in (0 for skip), in_logical, Hs, P, skip, layer, dir."""
    K, D, H, P, Hs, skip0 = _dims(mode, num_units, input_size, input_mode, direction, num_proj)
    specs = []
    for l in range(num_layers):
        in_logical = input_size if l == 0 else D * Hs
        skip = skip0 and l == 0
        for d in range(D):
            specs.append(dict(K=K, H=H, Hs=Hs, P=P, layer=l, dir=d, skip=skip,
                              in_logical=in_logical, **{"in": 0 if skip else in_logical}))
    return specs


def _region_shapes(spec, part=None):
    """[(kind, k, shape)] of one pseudo-layer's regions, in layout order: its matrices
    (part='mats'), its biases (part='biases'), or both (None).  The opaque buffer is cuDNN's
    layout: the matrices of every pseudo-layer in order, then the biases of every one."""
    K, H, Hs, P, w = spec["K"], spec["H"], spec["Hs"], spec["P"], spec["in"]
    mats, biases = [], []
    if not spec["skip"]:
        mats += [("W", k, (H, w)) for k in range(K)]
    mats += [("R", k, (H, Hs)) for k in range(K)]
    if P:
        mats.append(("Pm", 0, (P, H)))
    biases += [("bW", k, (H,)) for k in range(K)]
    biases += [("bR", k, (H,)) for k in range(K)]
    return {"mats": mats, "biases": biases, None: mats + biases}[part]


def params_size(**kw):
    """Number of elements of the opaque params buffer (kw as for layer_specs)."""
    total = 0
    for spec in layer_specs(**kw):
        for _, _, shape in _region_shapes(spec):
            total += int(np.prod(shape))
    return total


def params_size_formula(*, mode, num_layers, num_units, input_size, input_mode="linear_input",
                        direction="unidirectional", num_proj=0):
    """The closed formula of the brief (independent of layer_specs), for cross-checking."""
    K, D, H, P, Hs, skip = _dims(mode, num_units, input_size, input_mode, direction, num_proj)
    total = 0
    for l in range(num_layers):
        in_l = (0 if skip else input_size) if l == 0 else D * Hs
        total += D * (K * H * in_l + K * H * Hs + (P * H if P else 0) + 2 * K * H)
    return total


def unpack_params(params, **kw):
    """Flat params (array or tensor) -> list (per pseudo-layer) of dicts with tensors
    'W' (list of K [H, in] or None for skip), 'R' (K [H, Hs]), 'Pm' ([P, H] or None),
    'bW' (K [H]), 'bR' (K [H]).  Slicing is done with TF ops (differentiable)."""
    params = tf.convert_to_tensor(params)
    specs = layer_specs(**kw)
    expected = params_size(**kw)
    if int(params.shape[0]) != expected:
        raise ValueError(f"params has {params.shape[0]} elements, expected {expected}")
    out = [{"W": None if spec["skip"] else [None] * spec["K"], "R": [None] * spec["K"],
            "Pm": None, "bW": [None] * spec["K"], "bR": [None] * spec["K"], "spec": spec}
           for spec in specs]
    off = 0
    for part in ("mats", "biases"):
        for spec, d in zip(specs, out):
            for kind, k, shape in _region_shapes(spec, part):
                n = int(np.prod(shape))
                t = tf.reshape(params[off:off + n], shape)
                off += n
                if kind == "Pm":
                    d["Pm"] = t
                else:
                    d[kind][k] = t
    assert off == expected
    return out


def pack_params(layers):
    """Inverse of unpack_params: list of dicts (W, R, Pm, bW, bR) -> flat tensor (every
    pseudo-layer's matrices, then every pseudo-layer's biases)."""
    mats, biases = [], []
    for d in layers:
        ms = (list(d["W"]) if d["W"] is not None else []) + list(d["R"])
        if d.get("Pm") is not None:
            ms.append(d["Pm"])
        mats += [tf.reshape(tf.convert_to_tensor(m), [-1]) for m in ms]
        biases += [tf.reshape(tf.convert_to_tensor(b), [-1])
                   for b in list(d["bW"]) + list(d["bR"])]
    return tf.concat(mats + biases, axis=0)


def to_canonical(params, *, v2=True, **kw):
    """Flat params -> (weights, biases) lists of tensors in the canonical order of §4.2.
    Skip-input layer-0 input matrices come out as empty [H, 0] tensors.  The projection is
    appended per pseudo-layer only for v2 (V1 has no num_proj)."""
    weights, biases = [], []
    for d in unpack_params(params, **kw):
        spec = d["spec"]
        if d["W"] is None:
            weights += [tf.zeros([spec["H"], 0], dtype=d["R"][0].dtype)] * spec["K"]
        else:
            weights += list(d["W"])
        weights += list(d["R"])
        if d["Pm"] is not None and v2:
            weights.append(d["Pm"])
        biases += list(d["bW"]) + list(d["bR"])
    return weights, biases


def from_canonical(weights, biases, **kw):
    """(weights, biases) in canonical order -> flat params (inverse of to_canonical, v2)."""
    specs = layer_specs(**kw)
    wi, bi, layers = 0, 0, []
    for spec in specs:
        K = spec["K"]
        W = None if spec["skip"] else list(weights[wi:wi + K])
        wi += K
        R = list(weights[wi:wi + K])
        wi += K
        Pm = None
        if spec["P"]:
            Pm = weights[wi]
            wi += 1
        layers.append({"W": W, "R": R, "Pm": Pm, "bW": list(biases[bi:bi + K]),
                       "bR": list(biases[bi + K:bi + 2 * K])})
        bi += 2 * K
    assert wi == len(weights) and bi == len(biases)
    return pack_params(layers)


def num_canonical(*, mode, num_layers, direction="unidirectional", num_proj=0):
    """(num_weights, num_biases) of ParamsToCanonicalV2 (V1: num_params = num_biases)."""
    K, D = num_gates(mode), num_dirs(direction)
    return num_layers * D * (2 * K + (1 if num_proj else 0)), num_layers * D * 2 * K


def random_params(rng, *, scale=1.0, bias_scale=0.5, **kw):
    """Random float64 flat params (numpy); weights ~ H(0, 1/fan_in) so pre-activations are O(1)."""
    layers = []
    for spec in layer_specs(**kw):
        K, H, Hs, P, w = spec["K"], spec["H"], spec["Hs"], spec["P"], spec["in"]
        fan = max(1, w + Hs)
        layers.append({
            "W": None if spec["skip"] else
            [scale * rng.normal(size=(H, w)) / np.sqrt(fan) for _ in range(K)],
            "R": [scale * rng.normal(size=(H, Hs)) / np.sqrt(fan) for _ in range(K)],
            "Pm": scale * rng.normal(size=(P, H)) / np.sqrt(H) if P else None,
            "bW": [bias_scale * rng.normal(size=(H,)) for _ in range(K)],
            "bR": [bias_scale * rng.normal(size=(H,)) for _ in range(K)],
        })
    return pack_params(layers).numpy()


# ---------------------------------------------------------------------------------------------
# forward
# ---------------------------------------------------------------------------------------------

def _mm_t(a, m):
    """a [B, k] times m^T for m [n, k] -> [B, n]."""
    return tf.matmul(a, m, transpose_b=True)


def _cell(mode, xw, h, c, lay):
    """One step.  xw: list of K input pre-activations (W_k x + bW_k), [B, H] each."""
    R, bR = lay["R"], lay["bR"]
    if mode == "lstm":
        pre = [xw[k] + _mm_t(h, R[k]) + bR[k] for k in range(4)]
        i, f = tf.sigmoid(pre[0]), tf.sigmoid(pre[1])
        g, o = tf.tanh(pre[2]), tf.sigmoid(pre[3])
        c_new = f * c + i * g
        hh = o * tf.tanh(c_new)
        h_new = _mm_t(hh, lay["Pm"]) if lay["Pm"] is not None else hh
        return h_new, c_new
    if mode == "gru":
        r = tf.sigmoid(xw[0] + _mm_t(h, R[0]) + bR[0])
        z = tf.sigmoid(xw[1] + _mm_t(h, R[1]) + bR[1])
        n = tf.tanh(xw[2] + r * (_mm_t(h, R[2]) + bR[2]))
        return (1.0 - z) * n + z * h, c
    pre = xw[0] + _mm_t(h, R[0]) + bR[0]
    act = tf.tanh if mode == "rnn_tanh" else tf.nn.relu
    return act(pre), c


def _run_direction(mode, x, h0, c0, lay, lengths, reverse):
    """x [T, B, in]; returns (out [T, B, Hs], h_T, c_T) with per-sequence lengths [B] or None."""
    T = int(x.shape[0])
    K = lay["spec"]["K"]
    h, c = h0, c0
    outs = [None] * T
    steps = range(T - 1, -1, -1) if reverse else range(T)
    for t in steps:
        xt = x[t]
        if lay["W"] is None:      # skip input: identity input matrices
            xw = [xt + lay["bW"][k] for k in range(K)]
        else:
            xw = [_mm_t(xt, lay["W"][k]) + lay["bW"][k] for k in range(K)]
        h_new, c_new = _cell(mode, xw, h, c, lay)
        if lengths is None:
            h, c = h_new, c_new
            outs[t] = h_new
        else:
            valid = tf.reshape(tf.constant(t, tf.int32) < lengths, [-1, 1])
            h = tf.where(valid, h_new, h)
            if c is not None:
                c = tf.where(valid, c_new, c)
            outs[t] = tf.where(valid, h_new, tf.zeros_like(h_new))
    if T == 0:
        out = tf.zeros([0, int(x.shape[1]), int(h0.shape[-1])], dtype=x.dtype)
    else:
        out = tf.stack(outs, axis=0)
    return out, h, c


def cudnn_rnn_ref(x, h0, c0, params, *, mode, num_layers, num_units, input_size,
                  input_mode="linear_input", direction="unidirectional", num_proj=0,
                  seq_lengths=None, time_major=True):
    """Reference forward of CudnnRNN / V2 / V3 (dropout = 0).

    x: [T, B, I] (time_major) or [B, T, I]; h0: [L*D, B, Hs] (time_major) or [B, L*D, Hs] whose
    memory is read as [L*D, B, Hs] (stock quirk); c0 likewise with H (lstm; ignored otherwise,
    may be None).  Returns (output, output_h, output_c) as float64 tensors; output_c is None for
    non-lstm modes.
    """
    if num_proj and mode != "lstm":
        raise ValueError("num_proj needs lstm")
    x = tf.convert_to_tensor(x, F64)
    h0 = tf.convert_to_tensor(h0, F64)
    D = num_dirs(direction)
    LD = num_layers * D
    Hs = num_proj if num_proj else num_units
    if not time_major:
        x = tf.transpose(x, [1, 0, 2])
    B = int(x.shape[1])
    h0 = tf.reshape(h0, [LD, B, Hs])
    if mode == "lstm":
        c0 = tf.reshape(tf.convert_to_tensor(c0, F64), [LD, B, num_units])
    lengths = None if seq_lengths is None else tf.constant(np.asarray(seq_lengths, np.int32))
    layers = unpack_params(tf.convert_to_tensor(params, F64), mode=mode, num_layers=num_layers,
                           num_units=num_units, input_size=input_size, input_mode=input_mode,
                           direction=direction, num_proj=num_proj)
    inp = x
    hs, cs = [], []
    for l in range(num_layers):
        outs = []
        for d in range(D):
            p = l * D + d
            c_init = c0[p] if mode == "lstm" else None
            o, h, c = _run_direction(mode, inp, h0[p], c_init, layers[p], lengths, d == 1)
            outs.append(o)
            hs.append(h)
            cs.append(c)
        inp = outs[0] if D == 1 else tf.concat(outs, axis=2)
    output = inp
    output_h = tf.stack(hs, axis=0)
    output_c = tf.stack(cs, axis=0) if mode == "lstm" else None
    if not time_major:
        output = tf.transpose(output, [1, 0, 2])
        output_h = tf.reshape(output_h, [B, LD, Hs])
        if output_c is not None:
            output_c = tf.reshape(output_c, [B, LD, num_units])
    return output, output_h, output_c
