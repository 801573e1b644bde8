"""Test cases of the ``oxport.signal`` pack (imported by the op-test runner only)."""

from __future__ import annotations

import torch

from oxport.opsets.signal import pack


def _rotate(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in complex form, as DeepSeek-V2 and Llama 4 write it."""
    pairs = torch.view_as_complex(x.reshape(list(x.shape[:-1]) + [-1, 2]))
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angle), angle)).flatten(-2)


def _window_length(x: torch.Tensor) -> int:
    return x.shape[0]


pack.case(["aten::view_as_complex", "aten::polar", "aten::view_as_real"], _rotate, (2, 3, 8),
          (3, 4))
pack.case("aten::real", lambda x: torch.view_as_complex(x).real * 2, (3, 4, 2))
pack.case("aten::real", lambda x: x.real, (3, 4), name="real_input")
pack.case("aten::imag", lambda x: torch.view_as_complex(x).imag, (3, 4, 2))
pack.case("aten::complex", lambda re, im: torch.view_as_real(torch.complex(re, im)), (3, 1),
          (4,), min_opset=8)

def _window_cases(name: str, window) -> None:
    """A window function's cases (``window`` a closure variable, which scripting resolves to
    the torch function; a default argument would be a parameter)."""
    pack.case(f"aten::{name}_window", lambda x: x * window(6), (6,), name="constant")
    pack.case(f"aten::{name}_window", lambda x: x * window(5, periodic=False), (5,),
              name="symmetric")
    if name != "kaiser":
        pack.case(f"aten::{name}_window", lambda x: x * window(x.shape[0]), (6,),
                  name="run_time_length", input_names=["x"], dynamic_axes={"x": {0: "n"}},
                  min_opset=11)


for _name, _call in (("hann", torch.hann_window), ("hamming", torch.hamming_window),
                     ("blackman", torch.blackman_window), ("bartlett", torch.bartlett_window),
                     ("kaiser", torch.kaiser_window)):
    _window_cases(_name, _call)
pack.case("aten::hamming_window", lambda x: x * torch.hamming_window(7, True, 0.6, 0.3), (7,),
          name="alpha_beta")
pack.case("aten::kaiser_window", lambda x: x * torch.kaiser_window(7, False, 5.0), (7,),
          name="beta")

pack.case("aten::fft_fftn", lambda x: torch.view_as_real(torch.fft.fftn(x, dim=(1, 2))),
          (2, 5, 6), rtol=1e-4, atol=1e-4)
pack.case("aten::fft_fftn", lambda x: torch.fft.fftn(x, norm="ortho").real, (4, 3),
          name="all_axes_ortho", rtol=1e-4, atol=1e-4)
pack.case("aten::fft_fftn",
          lambda x: torch.fft.fftn(torch.view_as_complex(x), dim=(-1,), norm="forward").abs(),
          (3, 8, 2), name="complex_input_forward", rtol=1e-4, atol=1e-5)
pack.case("aten::stft", lambda x: torch.stft(x, 16, hop_length=4, window=torch.hann_window(16),
                                             return_complex=True).abs(),
          (2, 64), rtol=1e-4, atol=1e-4)
pack.case("aten::stft", lambda x: torch.view_as_real(torch.stft(
    x, 8, win_length=6, center=False, normalized=True, onesided=False, return_complex=True)),
    (40,), name="short_window_two_sided", rtol=1e-4, atol=1e-4)


def _stft_center(pad_mode: str, center: bool = True):
    """``aten::stft.center`` with all its arguments, as torch.export keeps a direct call."""
    def model(x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.ops.aten.stft.center(
            x, 16, 4, 12, torch.hann_window(12), center, pad_mode, True, True, True, None))
    return model


for _mode, _opset in (("reflect", None), ("constant", None), ("replicate", None),
                      ("circular", 19)):
    pack.case("aten::stft", _stft_center(_mode), (2, 64), name=f"center_overload_{_mode}",
              rtol=1e-4, atol=1e-4, min_opset=_opset)
pack.case("aten::stft", _stft_center("reflect", center=False), (50,),
          name="center_overload_not_centred", rtol=1e-4, atol=1e-4)
pack.case("aten::fft_fft", lambda x: torch.view_as_real(torch.fft.fft(x, dim=0)), (6, 3),
          rtol=1e-4, atol=1e-4)
pack.case("aten::fft_fft", lambda x: torch.fft.fft(torch.view_as_complex(x), norm="ortho").abs(),
          (2, 5, 2), name="complex_ortho", rtol=1e-4, atol=1e-5)
pack.case("aten::fft_ifft", lambda x: (torch.fft.ifft(x).real, torch.fft.ifft(x).imag), (3, 8),
          rtol=1e-4, atol=1e-5)  # PyTorch's ifft of a real tensor is a conjugated view
pack.case("aten::fft_ifft",
          lambda x: torch.view_as_real(torch.fft.ifft(torch.view_as_complex(x), dim=1,
                                                      norm="forward")),
          (2, 4, 3, 2), name="complex_forward", rtol=1e-4, atol=1e-4)
pack.case("aten::fft_rfft", lambda x: torch.view_as_real(torch.fft.rfft(x)), (3, 10),
          rtol=1e-4, atol=1e-4)
pack.case("aten::fft_rfft", lambda x: torch.fft.rfft(x, dim=0, norm="forward").abs(), (7, 2),
          name="odd_forward", rtol=1e-4, atol=1e-5)
pack.case("aten::fft_irfft", lambda x: torch.fft.irfft(torch.view_as_complex(x)), (3, 5, 2),
          rtol=1e-4, atol=1e-5)
pack.case("aten::fft_irfft",
          lambda m, p: torch.fft.irfft(torch.polar(m, p), 8, dim=1, norm="ortho"), (2, 6, 3),
          (2, 6, 3), name="polar_trimmed_ortho", rtol=1e-4, atol=1e-5)
pack.case("aten::fft_irfft", lambda x: torch.fft.irfft(torch.view_as_complex(x), 7), (4, 2),
          name="odd_length", rtol=1e-4, atol=1e-5)

# Signal sizes: the signal zero-padded or trimmed to n (s) before the transform.
pack.case("aten::fft_rfft", lambda x: torch.view_as_real(torch.fft.rfft(x, n=8)), (2, 6),
          name="n_pads", rtol=1e-4, atol=1e-4)
pack.case("aten::fft_rfft", lambda x: torch.view_as_real(torch.fft.rfft(x, n=4, dim=0,
                                                                        norm="ortho")),
          (6, 3), name="n_trims", rtol=1e-4, atol=1e-4)
pack.case("aten::fft_rfft", lambda x: torch.view_as_real(torch.fft.rfft(x, n=10)), (2, 7),
          name="n_pads_run_time_length", rtol=1e-4, atol=1e-4, input_names=["x"],
          dynamic_axes={"x": {1: "n"}}, not_exportable="torch.export specializes the length "
          "(n=10 pads every length below 10 alike)")
pack.case("aten::fft_fft", lambda x: torch.view_as_real(torch.fft.fft(
    torch.view_as_complex(x), n=7, norm="forward")), (3, 5, 2), name="complex_n_pads",
    rtol=1e-4, atol=1e-4)
pack.case("aten::fft_fftn", lambda x: torch.view_as_real(torch.fft.fftn(x, s=(3, 6))),
          (2, 4, 5), name="s_last_axes", rtol=1e-4, atol=1e-4)
