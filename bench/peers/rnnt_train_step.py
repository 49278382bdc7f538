"""Same-machine peer for `trainbench bench rnnt`: the same model, batch, optimizer and thread count in Debian's
python3-torch with python3-torchaudio, timed the same way (median step time after warm-up, a synthetic batch
of bench_utterance_seconds utterances with bench_tokens tokens each).

    /usr/bin/python3 bench/peers/rnnt_train_step.py --preset mini --threads 2 --steps 20 --warmup 3

The model and LAMB are rnnt_model.py's (written from the reference; LAMB as apex documents it), with
the preset's dropouts; the loss is torchaudio.functional.rnnt_loss. Besides the training line (the shape
bench/compare_step.sh parses) it prints the loss alone (torchaudio's forward and backward on logits of the
batch's lattice) and the training feature pipeline on one thread in torchaudio ops (resample for speed
perturbation, pre-emphasis, STFT, mel, log, normalisation, SpecAugment masks, frame stacking), as
`trainbench bench rnnt` prints them. Settings come from src/workloads/rnnt/presets.json.
"""
import math
import random
import time

import torch
import torchaudio

import step_timing

from rnnt_model import Rnnt, lamb_step


def features(audio, fbank, window):
    # The new rate in 100 Hz steps: torchaudio's polyphase resampler builds a kernel per rate-ratio phase,
    # so an arbitrary rate (gcd 1 with 16000) takes minutes.
    speed = random.uniform(0.85, 1.15)
    audio = torchaudio.functional.resample(audio, 16000, 100 * round(160 * speed))
    audio = audio + 1e-5 * torch.randn_like(audio)
    audio = torch.cat([audio[:1], audio[1:] - 0.97 * audio[:-1]])
    spec = torch.stft(audio, 512, 160, 320, window=window, center=True, pad_mode="reflect", return_complex=True)
    mel = torch.log(torch.clamp(fbank.T @ (spec.abs() ** 2), min=1e-20))
    mel = (mel - mel.mean(1, keepdim=True)) / (mel.std(1, keepdim=True) + 1e-5)
    mel = mel.unsqueeze(0)  # the masking transforms take (channel, freq, time)
    for _ in range(2):
        mel = torchaudio.transforms.FrequencyMasking(20)(mel)
    for _ in range(10):
        mel = torchaudio.transforms.TimeMasking(max(1, round(0.03 * mel.shape[2])))(mel)
    mel = mel[0]
    frames = mel.shape[1]
    mel = torch.nn.functional.pad(mel, (0, (-frames) % 3))
    return mel.T.reshape(-1, 240)


def main():
    args, config = step_timing.setup("rnnt", __doc__)
    batch = config["batch_size"]
    seconds, token_count, vocab = config["bench_utterance_seconds"], config["bench_tokens"], config["vocab_size"]
    frames = math.ceil((1 + int(seconds * 16000) // 160) / 3)
    shape = [240, config["encoder_hidden"], config["encoder_pre_layers"], config["encoder_post_layers"],
             config["stack_time_factor"], config["prediction_hidden"], config["prediction_layers"],
             config["joint_hidden"], vocab]
    model = Rnnt(shape, (config["encoder_dropout"], config["prediction_dropout"], config["joint_dropout"]))
    model.train()
    x = torch.randn(batch, frames, 240)
    lens = torch.full((batch,), frames)
    tokens = torch.randint(vocab, (batch, token_count))
    token_counts = torch.full((batch,), token_count)
    params = list(model.parameters())
    state = {}

    def steps():
        step = 0
        while True:
            step += 1
            for p in params:
                p.grad = None
            enc, enc_lens = model.encode(x, lens)
            logits = model.joint(enc[:, : int(enc_lens.max())], model.predict(tokens)[0])
            loss = torchaudio.functional.rnnt_loss(logits, tokens.int(), enc_lens.int(), token_counts.int(),
                                                   blank=vocab, reduction="mean")
            loss.backward()
            with torch.no_grad():
                lamb_step(params, state, 1e-3, step, config["beta1"], config["beta2"], config["epsilon"],
                          config["weight_decay"], config["max_grad_norm"])
            loss.item()
            yield

    step_timing.time_steps(args, steps(), batch, "utt/s", [f"{seconds} s utterances, {token_count} tokens"], digits=5)

    steps_t = math.ceil(frames / config["stack_time_factor"])
    logits = torch.randn(batch, steps_t, token_count + 1, vocab + 1, requires_grad=True)
    step_lens = torch.full((batch,), steps_t, dtype=torch.int32)
    times = []
    for i in range(args.warmup + args.steps):
        begin = time.perf_counter()
        torchaudio.functional.rnnt_loss(logits, tokens.int(), step_lens, token_counts.int(), blank=vocab,
                                        reduction="sum").backward()
        if i >= args.warmup:
            times.append(time.perf_counter() - begin)
    median = sorted(times)[len(times) // 2]
    print(f"torchaudio {torchaudio.__version__}: loss {batch / median:10.1f} utt/s  ({batch} x {steps_t} x "
          f"{token_count + 1} lattice, {vocab + 1} classes, forward and backward: {median:.5f} s/batch)")

    torch.set_num_threads(1)
    fbank = torchaudio.functional.melscale_fbanks(257, 0.0, 8000.0, 80, 16000, norm="slaney", mel_scale="slaney")
    window = torch.hann_window(320, periodic=False)
    audio = 0.1 * torch.randn(int(seconds * 16000))
    count = max(8, args.steps)
    begin = time.perf_counter()
    for _ in range(count):
        features(audio, fbank, window)
    elapsed = time.perf_counter() - begin
    print(f"torchaudio {torchaudio.__version__}: features {count / elapsed:10.1f} utt/s  ({seconds} s utterances, "
          f"training pipeline, 1 thread, {count} utterances: {elapsed / count:.5f} s/utt)")


if __name__ == "__main__":
    main()
