"""Independent reference for the speech feature test, run with Debian's python3-torch and python3-torchaudio.

Reads float32 samples (16 kHz) from argv[1] and writes, as float32, the reference RNN-T features before
SpecAugment to argv[2]: pre-emphasis 0.97, torch.stft(n_fft=512, hop 160, win_length 320, symmetric Hann,
center=True, reflect padding) power spectrum, torchaudio's Slaney mel filterbank (80 bands, as
librosa.filters.mel), natural log floored at 1e-20, per-band (x - mean) / (unbiased std + 1e-5), then frames
stacked by 3 and subsampled by 3 as the reference's stack_subsample_frames. argv[3] gets the filterbank.
"""
import sys

import numpy as np
import torch
import torchaudio

samples = torch.from_numpy(np.fromfile(sys.argv[1], dtype=np.float32)).double()
x = torch.cat([samples[:1], samples[1:] - 0.97 * samples[:-1]])
spec = torch.stft(x, n_fft=512, hop_length=160, win_length=320,
                  window=torch.hann_window(320, periodic=False, dtype=torch.float64),
                  center=True, pad_mode="reflect", return_complex=True)
power = spec.abs() ** 2                                     # (257, frames)
fbank = torchaudio.functional.melscale_fbanks(257, 0.0, 8000.0, 80, 16000, norm="slaney", mel_scale="slaney").double()
mel = torch.log(torch.clamp(fbank.T @ power, min=1e-20))    # (80, frames)
mel = (mel - mel.mean(dim=1, keepdim=True)) / (mel.std(dim=1, keepdim=True) + 1e-5)
x = mel.unsqueeze(0)
seq = [x]
for n in range(1, 3):
    tmp = torch.zeros_like(x)
    tmp[:, :, :-n] = x[:, :, n:]
    seq.append(tmp)
stacked = torch.cat(seq, dim=1)[:, :, ::3]                  # (1, 240, ceil(frames / 3))
stacked[0].T.contiguous().float().numpy().tofile(sys.argv[2])
fbank.T.contiguous().float().numpy().tofile(sys.argv[3])    # (80, 257)
