// ONNX's signal ops: the Hann, Hamming and Blackman windows (built on the host from their
// size, like a constant), and DFT and STFT as matrix products with a host-built matrix of
// cosines and sines. Complex values are ONNX's: a last dim of 2 holding (real, imaginary);
// a last dim of 1 is a real signal.
#pragma once

#include "kiln/onnx/ops_nn.hpp"
#include "kiln/onnx/runtime.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>
#include <vector>

namespace kiln::onnx {

namespace signal_detail {

using nn_detail::Dims;
using nn_detail::Outs;
using nn_detail::P;

// ---------------------------------------------------------------- windows

// A cosine-sum window a0 - a1 cos(2πn/D) + a2 cos(4πn/D) of the node's size, where D is the
// size (periodic, the default) or the size - 1 (symmetric).
template <class B> Kernel<B> cosine_window(double a0, double a1, double a2) {
  return [=](const Args<B>& a) -> Outs<B> {
    const std::vector<std::int64_t> size = a.ints(0);
    KILN_CHECK(size.size() == 1 && size[0] >= 0, "the size must be one number, 0 or more, got {} of shape {}", size,
               a.shape(0));
    const std::int64_t n = size[0], denominator = a.node.attr_int("periodic", 1) != 0 ? n : n - 1;
    std::vector<double> values(static_cast<std::size_t>(n), 1.0);  // a symmetric window of 1 is its peak
    for (std::int64_t i = 0; denominator > 0 && i < n; ++i) {
      const double phase = 2 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(denominator);
      values[static_cast<std::size_t>(i)] = a0 - a1 * std::cos(phase) + a2 * std::cos(2 * phase);
    }
    const DType dtype = detail::held_dtype(a.node.attr_int("output_datatype", 1));
    return {nn_detail::constant<B>(values, Shape{n}, dtype, a.device)};
  };
}

// ---------------------------------------------------------------- DFT, STFT

// The matrix [length * channels, 2 * bins] that takes `length` samples of a signal
// (channels 1: real, 2: complex, interleaved as ONNX lays them out) to the first `bins`
// terms of its DFT of size `size`, interleaved the same way. Samples past `size` are cut
// off (their rows are 0); a size past `length` pads with zeros, which add nothing. The
// inverse transform conjugates the phase and divides by the size.
template <class B>
P<B> dft_matrix(std::int64_t length, std::int64_t channels, std::int64_t size, std::int64_t bins, bool inverse,
                DType dtype, const typename B::Device& device) {
  const double sign = inverse ? -1 : 1, scale = inverse ? 1.0 / static_cast<double>(size) : 1.0;
  std::vector<double> m(static_cast<std::size_t>(length * channels * 2 * bins), 0.0);
  for (std::int64_t n = 0; n < std::min(length, size); ++n)
    for (std::int64_t k = 0; k < bins; ++k) {
      // k * n modulo the size keeps the angle small, and so exact, for long transforms.
      const double angle = 2 * std::numbers::pi * static_cast<double>((k * n) % size) / static_cast<double>(size);
      const double c = std::cos(angle) * scale, s = std::sin(angle) * scale * sign;
      double* real_row = &m[static_cast<std::size_t>((n * channels) * 2 * bins)];
      real_row[2 * k] = c;       // (x_re + i x_im)(cos - i sin): re += x_re cos + x_im sin
      real_row[2 * k + 1] = -s;  // im += x_im cos - x_re sin
      if (channels == 2) {
        double* imag_row = real_row + 2 * bins;
        imag_row[2 * k] = s;
        imag_row[2 * k + 1] = c;
      }
    }
  return nn_detail::constant<B>(m, Shape{length * channels, 2 * bins}, dtype, device);
}

// The output bins of a transform of `size` samples: all, or the first half and the middle
// one where `onesided` keeps only those a real signal's conjugate symmetry does not repeat.
inline std::int64_t bins(std::int64_t size, bool onesided) { return onesided ? size / 2 + 1 : size; }

// An optional one-number integer input, or `fallback`.
template <class B> std::int64_t int_input(const Args<B>& a, std::size_t i, std::int64_t fallback) {
  if (!nn_detail::given(a, i)) return fallback;
  const std::vector<std::int64_t> v = a.ints(i);
  KILN_CHECK(v.size() == 1, "input {} must hold one number, got shape {}", i, a.shape(i));
  return v[0];
}

template <class B> Outs<B> dft(const Args<B>& a) {
  nn_detail::check_float(a, 0);
  const Shape xs = a.shape(0);
  const std::size_t rank = xs.rank();
  KILN_CHECK(rank >= 2 && (xs[rank - 1] == 1 || xs[rank - 1] == 2),
             "expected a signal [batch, n..., 1 or 2] (real or complex), got {}", xs);
  // Opset 20 made the axis an input, counted over all dims (the last, complex one included).
  const std::int64_t axis_value = a.opset >= 20 ? int_input(a, 2, -2) : a.node.attr_int("axis", 1);
  const std::size_t dim = detail::axis(axis_value, rank);
  KILN_CHECK(dim != rank - 1, "axis {} names the real/imaginary dim of the signal {}", axis_value, xs);
  const bool inverse = a.node.attr_int("inverse", 0) != 0, onesided = a.node.attr_int("onesided", 0) != 0;
  if (inverse && onesided) unsupported("an inverse DFT of a onesided spectrum (onesided and inverse both 1)");
  const std::int64_t length = xs[dim], channels = xs[rank - 1], size = int_input(a, 1, length);
  KILN_CHECK(size >= 1, "dft_length {} must be positive (signal {})", size, xs);
  const std::int64_t out_bins = bins(size, onesided);

  // The signal dim goes next to the complex one, so that each signal is a row [length * channels].
  Dims perm, rows;
  for (std::size_t d = 0; d + 1 < rank; ++d)
    if (d != dim) perm.push_back(static_cast<std::int64_t>(d));
  perm.push_back(static_cast<std::int64_t>(dim));
  perm.push_back(static_cast<std::int64_t>(rank - 1));
  std::int64_t count = 1;
  for (std::size_t i = 0; i + 2 < rank; ++i) {
    rows.push_back(xs[perm[i]]);
    count *= xs[perm[i]];
  }
  const P<B> x = B::reshape(detail::permute<B>(a[0], perm), Shape{count, length * channels});
  const P<B> m = dft_matrix<B>(length, channels, size, out_bins, inverse, a.dtype(0), a.device);
  rows.push_back(out_bins);
  rows.push_back(2);
  const P<B> y = B::reshape(B::matmul(x, m), Shape(rows));
  Dims back(rank);
  for (std::size_t i = 0; i < rank; ++i) back[perm[i]] = static_cast<std::int64_t>(i);
  return {detail::permute<B>(y, back)};
}

// STFT: frames of the signal [batch, length, 1 or 2] every frame_step samples, each times
// the window, each transformed: [batch, frames, bins, 2].
template <class B> Outs<B> stft(const Args<B>& a) {
  nn_detail::check_float(a, 0);
  const Shape xs = a.shape(0);
  KILN_CHECK(xs.rank() == 3 && (xs[2] == 1 || xs[2] == 2),
             "expected a signal [batch, length, 1 or 2] (real or complex), got {}", xs);
  const std::int64_t step = int_input(a, 1, 0);
  KILN_CHECK(step >= 1, "frame_step {} must be positive", step);
  const bool windowed = nn_detail::given(a, 2);
  KILN_CHECK(windowed || nn_detail::given(a, 3), "STFT needs a window or a frame_length");
  if (windowed) KILN_CHECK(a.shape(2).rank() == 1, "the window must be 1-d, got {}", a.shape(2));
  const std::int64_t frame = windowed ? a.shape(2)[0] : int_input(a, 3, 0);
  if (windowed && nn_detail::given(a, 3))
    KILN_CHECK(int_input(a, 3, 0) == frame, "frame_length {} differs from the window's length {}", int_input(a, 3, 0),
               frame);
  const std::int64_t batch = xs[0], length = xs[1], channels = xs[2];
  KILN_CHECK(frame >= 1 && frame <= length, "frame_length {} must be in [1, {}] for the signal {}", frame, length, xs);
  const std::int64_t frames = 1 + (length - frame) / step;
  const std::int64_t out_bins = bins(frame, a.node.attr_int("onesided", 1) != 0);

  // The frames, gathered along the signal dim by a host-built index [batch, frames * frame, channels].
  std::vector<std::int64_t> index;
  index.reserve(static_cast<std::size_t>(batch * frames * frame * channels));
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t f = 0; f < frames; ++f)
      for (std::int64_t n = 0; n < frame; ++n)
        for (std::int64_t c = 0; c < channels; ++c) index.push_back(f * step + n);
  const P<B> at = nn_detail::constant<B>(index, Shape{batch, frames * frame, channels}, DType::i64, a.device);
  P<B> x = B::reshape(B::gather(a[0], 1, at), Shape{batch * frames, frame, channels});
  if (windowed) x = nn_detail::mul<B>(x, B::reshape(nn_detail::with_dtype<B>(a[2], a.dtype(0)), Shape{frame, 1}));
  const P<B> m = dft_matrix<B>(frame, channels, frame, out_bins, false, a.dtype(0), a.device);
  const P<B> y = B::matmul(B::reshape(x, Shape{batch * frames, frame * channels}), m);
  return {B::reshape(y, Shape{batch, frames, out_bins, 2})};
}

}  // namespace signal_detail

// The op types add_signal_ops registers (checked when a table is built with add_group).
inline constexpr std::string_view kSignalOps[] = {"HannWindow", "HammingWindow", "BlackmanWindow", "DFT", "STFT"};
inline constexpr OpGroup kSignalGroup{"signal", kSignalOps};

template <class B> void add_signal_ops(OpTable<B>& t) {
  using namespace signal_detail;
  t["HannWindow"] = {cosine_window<B>(0.5, 0.5, 0), 17};
  // Hamming's coefficients as ONNX gives them: 25/46 and 21/46, not the rounded 0.54 and 0.46.
  t["HammingWindow"] = {cosine_window<B>(25.0 / 46, 21.0 / 46, 0), 17};
  t["BlackmanWindow"] = {cosine_window<B>(0.42, 0.5, 0.08), 17};
  t["DFT"] = {dft<B>, 17};
  t["STFT"] = {stft<B>, 17};
}

}  // namespace kiln::onnx
