// nn::ctc_loss: the connectionist temporal classification loss, with
// torch.nn.functional.ctc_loss's meaning, arguments and defaults: the negative log-likelihood
// of each target sequence under every alignment of it (with blanks and repeats) to the frames
// of log_probs.
//
// The forward recursion over the frames is written with tensor ops in log space, so every
// backend runs it and autodiff differentiates it: the gradient is the true one of log_probs.
// PyTorch's own backward returns that plus exp(log_probs), which equals it once it passes
// through the log_softmax that makes log_probs; after a log_softmax both agree.
#pragma once

#include "kiln/nn/loss.hpp"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace kiln::nn {

struct CtcLossOptions {
  std::int64_t blank = 0;
  Reduction reduction = Reduction::mean;  // mean: each loss divided by its target length, then the batch mean
  bool zero_infinity = false;             // impossible alignments give 0 (and no gradient) instead of inf
};

namespace detail {

// log_probs [T, N, C]; labels[n] the target sequence of sample n (its length target_lengths[n]).
template <class B>
Tensor<B, 1> ctc_loss(const Tensor<B, 3>& log_probs, const std::vector<std::vector<std::int64_t>>& labels,
                      const std::vector<std::int64_t>& input_lengths, const CtcLossOptions& o) {
  const std::int64_t time = log_probs.dim(0), n = log_probs.dim(1), c = log_probs.dim(2);
  KILN_CHECK(log_probs.dtype() == DType::f32 || log_probs.dtype() == DType::f64,
             "ctc_loss: log_probs must be f32 or f64, got {}", log_probs.dtype());
  KILN_CHECK(o.blank >= 0 && o.blank < c, "ctc_loss: blank {} is outside [0, {}) (log_probs {})", o.blank, c,
             log_probs.shape());
  KILN_CHECK(static_cast<std::int64_t>(input_lengths.size()) == n,
             "ctc_loss: {} input_lengths for a batch of {} (log_probs {} is [T, N, C])", input_lengths.size(), n,
             log_probs.shape());
  // A log-probability far below any real one but finite, so that unreachable states carry no
  // NaN into the gradient; f32 and f64 hold it.
  constexpr double never = -1e30;
  std::int64_t longest = 1, frames = 1;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t length = input_lengths[static_cast<std::size_t>(i)];
    KILN_CHECK(length >= 0 && length <= time, "ctc_loss: input_lengths[{}] = {} is outside [0, {}] (log_probs {})", i,
               length, time, log_probs.shape());
    frames = std::max(frames, length);
    longest = std::max(longest, static_cast<std::int64_t>(labels[static_cast<std::size_t>(i)].size()));
  }
  // The extended sequence of sample i: blank, l1, blank, l2, ..., blank, padded with blanks to
  // `width` states. The states past a sample's own end never feed the ones before it.
  const std::int64_t width = 2 * longest + 1;
  const auto count = [](std::int64_t size) { return static_cast<std::size_t>(size); };
  std::vector<std::int64_t> state_class(count(time * n * width), o.blank), ends(count(2 * n), 0);
  std::vector<double> start(count(n * width), 0.0), skip(count(n * width), 0.0), end_offset(count(2 * n), 0.0);
  std::vector<double> divisor(count(n), 1.0), impossible(count(n), 0.0), empty_input(count(n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& l = labels[static_cast<std::size_t>(i)];
    const auto length = static_cast<std::int64_t>(l.size());
    std::int64_t repeats = 0;
    for (std::int64_t k = 0; k < length; ++k) {
      const std::int64_t label = l[static_cast<std::size_t>(k)];
      KILN_CHECK(label >= 0 && label < c, "ctc_loss: target {} of sample {} is {}, outside [0, {})", k, i, label, c);
      for (std::int64_t t = 0; t < time; ++t) state_class[static_cast<std::size_t>((t * n + i) * width + 2 * k + 1)] = label;
      // A label may follow the one two states back unless it repeats it (a blank must part them).
      if (k > 0 && label != l[static_cast<std::size_t>(k - 1)]) skip[static_cast<std::size_t>(i * width + 2 * k + 1)] = 1.0;
      if (k > 0 && label == l[static_cast<std::size_t>(k - 1)]) ++repeats;
    }
    start[static_cast<std::size_t>(i * width)] = 1.0;
    if (length > 0) start[static_cast<std::size_t>(i * width + 1)] = 1.0;
    ends[static_cast<std::size_t>(2 * i)] = 2 * length;
    ends[static_cast<std::size_t>(2 * i + 1)] = std::max<std::int64_t>(2 * length - 1, 0);
    if (length == 0) end_offset[static_cast<std::size_t>(2 * i + 1)] = never;
    divisor[static_cast<std::size_t>(i)] = static_cast<double>(std::max<std::int64_t>(length, 1));
    const std::int64_t frames_i = input_lengths[static_cast<std::size_t>(i)];
    impossible[static_cast<std::size_t>(i)] = frames_i < length + repeats ? 1.0 : 0.0;
    empty_input[static_cast<std::size_t>(i)] = frames_i == 0 && length == 0 ? 1.0 : 0.0;
  }
  const auto device = log_probs.device();
  const auto floats = [&](const std::vector<double>& v, Shape shape) {
    return TensorData::from(v, std::move(shape)).convert(log_probs.dtype());
  };

  // Each frame's log-probability of each state's class: [T, N, width].
  const Tensor<B, 3> emit =
      log_probs.gather(2, Tensor<B, 3, Int>::from_data(TensorData::from(state_class, Shape{time, n, width}), device));
  const auto frame = [&](std::int64_t t) { return emit.narrow(0, t, 1).squeeze_dim(0); };
  const Tensor<B, 2, Bool> skips = Tensor<B, 2>::from_data(floats(skip, Shape{n, width}), device).gt(0.5);
  const Tensor<B, 2> lengths = Tensor<B, 2>::from_data(
      floats(std::vector<double>(input_lengths.begin(), input_lengths.end()), Shape{n, 1}), device);
  const Tensor<B, 2> before = Tensor<B, 2>::full({n, 2}, never, device, log_probs.dtype());

  // alpha[n, s]: log of the probability of the alignments of the first s + 1 states to the frames so far.
  Tensor<B, 2> alpha = frame(0).mask_fill(Tensor<B, 2>::from_data(floats(start, Shape{n, width}), device).le(0.5), never);
  for (std::int64_t t = 1; t < frames; ++t) {
    const Tensor<B, 2> from_previous = Tensor<B, 2>::cat({before.narrow(1, 0, 1), alpha.narrow(1, 0, width - 1)}, 1);
    const Tensor<B, 2> from_skipped =
        Tensor<B, 2>::cat({before, alpha.narrow(1, 0, width - 2)}, 1).mask_fill(skips.logical_not(), never);
    const Tensor<B, 2> next = stack(std::vector{alpha, from_previous, from_skipped}, 0).logsumexp(0).squeeze_dim(0) + frame(t);
    alpha = where(lengths.gt(static_cast<double>(t)), next, alpha);  // samples whose input has ended keep theirs
  }
  // The sequence ends in its last label or the blank after it.
  const Tensor<B, 2> last = alpha.gather(1, Tensor<B, 2, Int>::from_data(TensorData::from(ends, Shape{n, 2}), device)) +
                            Tensor<B, 2>::from_data(floats(end_offset, Shape{n, 2}), device);
  Tensor<B, 1> loss = -last.logsumexp(1).template reshape<1>({n});
  // An input of no frames explains only the empty target, with probability 1.
  loss = loss.mask_fill(Tensor<B, 1>::from_data(floats(empty_input, Shape{n}), device).gt(0.5), 0.0);
  const Tensor<B, 1, Bool> infinite =
      Tensor<B, 1>::from_data(floats(impossible, Shape{n}), device).gt(0.5).logical_or(loss.gt(-never / 2));
  loss = loss.mask_fill(infinite, o.zero_infinity ? 0.0 : std::numeric_limits<double>::infinity());
  if (o.reduction == Reduction::mean) return (loss / Tensor<B, 1>::from_data(floats(divisor, Shape{n}), device)).mean();
  return reduced(loss, o.reduction, "ctc_loss");
}

inline void check_target_lengths(std::int64_t batch, const std::vector<std::int64_t>& target_lengths) {
  KILN_CHECK(static_cast<std::int64_t>(target_lengths.size()) == batch,
             "ctc_loss: {} target_lengths for a batch of {}", target_lengths.size(), batch);
}

}  // namespace detail

// The CTC loss of log_probs [T, N, C] (log_softmax over C) and padded targets [N, S]: sample
// n's target is targets[n, :target_lengths[n]] and its input log_probs[:input_lengths[n], n].
// The lengths may also be Int tensors [N], read on the host.
template <class B>
Tensor<B, 1> ctc_loss(const Tensor<B, 3>& log_probs, const Tensor<B, 2, Int>& targets,
                      const std::vector<std::int64_t>& input_lengths, const std::vector<std::int64_t>& target_lengths,
                      const CtcLossOptions& o = {}) {
  const std::int64_t n = log_probs.dim(1), s = targets.dim(1);
  KILN_CHECK(targets.dim(0) == n, "ctc_loss: targets {} for a batch of {} (log_probs {})", targets.shape(), n,
             log_probs.shape());
  detail::check_target_lengths(n, target_lengths);
  const std::vector<std::int64_t> flat = targets.template to_vec<std::int64_t>();
  std::vector<std::vector<std::int64_t>> labels;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t length = target_lengths[static_cast<std::size_t>(i)];
    KILN_CHECK(length >= 0 && length <= s, "ctc_loss: target_lengths[{}] = {} is outside [0, {}] (targets {})", i, length,
               s, targets.shape());
    const auto row = flat.begin() + i * s;
    labels.emplace_back(row, row + length);
  }
  return detail::ctc_loss(log_probs, labels, input_lengths, o);
}

// The same with the targets concatenated in one 1-d tensor of sum(target_lengths) labels.
template <class B>
Tensor<B, 1> ctc_loss(const Tensor<B, 3>& log_probs, const Tensor<B, 1, Int>& targets,
                      const std::vector<std::int64_t>& input_lengths, const std::vector<std::int64_t>& target_lengths,
                      const CtcLossOptions& o = {}) {
  const std::int64_t n = log_probs.dim(1);
  detail::check_target_lengths(n, target_lengths);
  const std::vector<std::int64_t> flat = targets.template to_vec<std::int64_t>();
  std::vector<std::vector<std::int64_t>> labels;
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t length = target_lengths[static_cast<std::size_t>(i)];
    KILN_CHECK(length >= 0 && offset + length <= targets.dim(0),
               "ctc_loss: target_lengths[{}] = {} goes past the {} concatenated targets", i, length, targets.dim(0));
    labels.emplace_back(flat.begin() + offset, flat.begin() + offset + length);
    offset += length;
  }
  KILN_CHECK(offset == targets.dim(0), "ctc_loss: target_lengths sum to {}, but there are {} concatenated targets", offset,
             targets.dim(0));
  return detail::ctc_loss(log_probs, labels, input_lengths, o);
}

// Either form of targets with the lengths in Int tensors [N], as torch takes them.
template <class B, std::size_t S>
Tensor<B, 1> ctc_loss(const Tensor<B, 3>& log_probs, const Tensor<B, S, Int>& targets, const Tensor<B, 1, Int>& input_lengths,
                      const Tensor<B, 1, Int>& target_lengths, const CtcLossOptions& o = {}) {
  return ctc_loss(log_probs, targets, input_lengths.template to_vec<std::int64_t>(),
                  target_lengths.template to_vec<std::int64_t>(), o);
}

}  // namespace kiln::nn
