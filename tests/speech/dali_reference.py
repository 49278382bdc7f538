"""Independent numpy model of the two DALI stages the RNN-T reference's pipeline runs before its features, for
the speech tests, run with Debian's /usr/bin/python3.

Written from DALI v1.5.0 (NGC 21.09, NVIDIA's v1.1 submission; the reference's Dockerfile pins 0.28.0, which
has the same two algorithms), in float32 as DALI computes, step by step:

- decoders.audio(sample_rate=R) on a mono file (dali/operators/decoder/audio/audio_decoder_impl.cc,
  audio_decoder_op.h, dali/kernels/signal/resampling.h): nothing when R equals the file's rate; otherwise
  ceil(n * R / rate) outputs, output j at input position j * rate / R (blocks of 1024 outputs start from the
  exact position, then add the float32 step), a Hann-windowed sinc of 16 lobes (quality 50) tabulated in
  16 * 64 + 1 entries and interpolated linearly, the same filter whatever the ratio (no wider cutoff when
  downsampling), taps outside the signal left out. x86's SSE2 path takes the taps in groups of four, finding
  the table entry by rounding to nearest (the scalar rest of the taps by truncation), and sums the four
  lanes as (0 + 2) + (1 + 3).
- nonsilent_region(cutoff_db) (dali/operators/audio/nonsilence_op.h, dali/kernels/signal/moving_mean_square.cc):
  W = min(window_length 2048, n); the mean square of each W-sample window in[k, k + W), k = 0 .. n - W, a
  running float32 sum recomputed at k = 0 and every reset_interval - W + 1 (8192) windows; threshold
  max * 10^(cutoff_db / 10); begin = the first window at or above it, length = last - first + W; {0, 0}
  when none is.

Usage: dali_reference.py DIR reads DIR/cases.txt, one case a line:
  resample NAME IN_RATE OUT_RATE      DIR/NAME.in.f32 -> DIR/NAME.out.f32
  nonsilent NAME CUTOFF_DB            DIR/NAME.in.f32 -> DIR/NAME.region ("begin length")
Options after DIR (the hand check of the tests that the comparison fails on a changed filter):
  --lobes N, --lookup N (table entries), --floor (no SSE rounding), --half-shift (output j at (j + 0.5) * s - 0.5).
"""
import sys

import numpy as np

f32 = np.float32


class Window:
    def __init__(self, lobes, coeffs):
        scale = f32(2 * lobes) / f32(coeffs - 1)
        scale_envelope = f32(2) / f32(coeffs)
        center = int((coeffs - 1) * 0.5)
        k = (np.arange(coeffs) - center).astype(f32)
        x = k * scale
        y = k * scale_envelope
        px = (x.astype(np.float64) * np.pi).astype(f32)  # DALI's float sinc: x *= M_PI
        with np.errstate(invalid="ignore", divide="ignore"):
            sinc = np.where(np.abs(px) < f32(1e-5), f32(1) - px * px * f32(1 / 6), np.sin(px) / px).astype(f32)
        hann = 0.5 * (1 + np.cos(y.astype(np.float64) * np.pi))
        self.lookup = np.zeros(coeffs + 2, f32)
        self.lookup[1:coeffs + 1] = (sinc.astype(np.float64) * hann).astype(f32)
        self.scale = f32(1) / scale
        self.center = f32(center + 1)
        self.lobes = lobes

    def at(self, x, rounded):
        fi = x * self.scale + self.center
        i = (np.rint(fi) if rounded else np.floor(fi)).astype(np.int64)
        di = fi - i.astype(f32)
        return self.lookup[i] + di * (self.lookup[i + 1] - self.lookup[i])


def resample(signal, in_rate, out_rate, lobes=16, lookup=None, sse_rounding=True, half_shift=False):
    if in_rate == out_rate:
        return signal.copy()
    window = Window(lobes, lookup or lobes * 64 + 1)
    n = len(signal)
    out_len = int(np.ceil(n * out_rate / in_rate))
    scale = in_rate / out_rate
    fscale = f32(scale)
    out = np.zeros(out_len, f32)
    for begin in range(0, out_len, 1024):
        end = min(begin + 1024, out_len)
        start = (begin + 0.5) * scale - 0.5 if half_shift else begin * scale
        base = int(np.floor(start))
        steps = np.full(end - begin, fscale, f32)
        steps[0] = f32(start - base)
        pos = np.add.accumulate(steps, dtype=f32)  # in_pos += fscale, sequentially in float32
        i0 = np.maximum(np.ceil(pos).astype(np.int64) - window.lobes, -base)
        i1 = np.minimum(np.floor(pos).astype(np.int64) + window.lobes, n - 1 - base)
        count = np.maximum(i1 - i0 + 1, 0)
        groups = count // 4
        lanes = np.zeros((4, end - begin), f32)
        xs = [i0.astype(np.int64) + k for k in range(4)]
        xs = [(x.astype(f32) - pos).astype(f32) for x in xs]
        for g in range(int(groups.max(initial=0))):
            live = g < groups
            for k in range(4):
                w = window.at(np.where(live, xs[k], f32(0)), rounded=sse_rounding)
                index = np.where(live, base + i0 + 4 * g + k, 0)
                lanes[k] = np.where(live, lanes[k] + signal[index] * w, lanes[k])
                xs[k] = xs[k] + f32(4)
        acc = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3])
        first = i0 + 4 * groups
        x = (first.astype(f32) - pos).astype(f32)
        for t in range(3):
            live = t < count - 4 * groups
            w = window.at(np.where(live, x, f32(0)), rounded=False)
            index = np.where(live, base + first + t, 0)
            acc = np.where(live, acc + signal[index] * w, acc)
            x = x + f32(1)
        out[begin:end] = acc
    return out


def nonsilent(signal, cutoff_db, window_length=2048, reset_interval=8192):
    n = len(signal)
    w = min(window_length, n)
    squares = signal * signal
    mms = np.zeros(n - w + 1, f32)
    mean_factor = f32(1) / f32(w)
    k = 0
    while k <= n - w:
        total = np.add.accumulate(squares[k:k + w], dtype=f32)[-1]
        stop = min(k + reset_interval, n) - w + 1
        run = np.add.accumulate(np.concatenate([[total], squares[k + w:stop + w - 1] - squares[k:stop - 1]]).astype(f32),
                                dtype=f32)
        mms[k:max(stop, k + 1)] = run * mean_factor
        k = max(stop, k + 1)
    threshold = mms.max() * np.power(f32(10), f32(cutoff_db) * (f32(1) / f32(10)))
    loud = np.flatnonzero(mms >= threshold)
    if loud.size == 0:
        return 0, 0
    return int(loud[0]), int(loud[-1] - loud[0] + w)


def main():
    directory = sys.argv[1]
    options = sys.argv[2:]
    kwargs = {}
    if "--lobes" in options:
        kwargs["lobes"] = int(options[options.index("--lobes") + 1])
    if "--lookup" in options:
        kwargs["lookup"] = int(options[options.index("--lookup") + 1])
    if "--floor" in options:
        kwargs["sse_rounding"] = False
    if "--half-shift" in options:
        kwargs["half_shift"] = True
    with open(f"{directory}/cases.txt") as cases:
        for line in cases:
            fields = line.split()
            if not fields:
                continue
            signal = np.fromfile(f"{directory}/{fields[1]}.in.f32", dtype=f32)
            if fields[0] == "resample":
                resample(signal, float(fields[2]), float(f32(fields[3])), **kwargs).tofile(f"{directory}/{fields[1]}.out.f32")
            elif fields[0] == "nonsilent":
                begin, length = nonsilent(signal, float(fields[2]))
                with open(f"{directory}/{fields[1]}.region", "w") as out:
                    out.write(f"{begin} {length}\n")
            else:
                sys.exit(f"unknown case {fields[0]}")


if __name__ == "__main__":
    main()
