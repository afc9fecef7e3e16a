// ONNX's losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (a log-softmax along
// the class dim followed by the same loss). Inputs are [N, C] or [N, C, d1, ..., dk] with
// labels [N] or [N, d1, ..., dk]; the labels are read on the host only to be checked, the
// loss itself is a gather of the log-probabilities along the class dim on the backend.
#pragma once

#include "kiln/onnx/ops_nn.hpp"
#include "kiln/onnx/runtime.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::onnx {

namespace loss_detail {

using nn_detail::Dims;
using nn_detail::Outs;
using nn_detail::P;

// The negative log-likelihood of `log_prob` [N, C, d...] at `labels` [N, d...], weighted by
// `weight` [C] (when given), with the labels equal to `ignore_index` left out, and reduced
// as the node's `reduction` asks.
template <class B>
P<B> nll(const Args<B>& a, const P<B>& log_prob, std::size_t labels_input, std::optional<std::size_t> weight_input) {
  const Shape xs = B::shape(log_prob), ls = a.shape(labels_input);
  KILN_CHECK(xs.rank() >= 2, "expected an input [N, C] or [N, C, d1, ..., dk], got {}", xs);
  Dims expected = xs.to_vector();
  expected.erase(expected.begin() + 1);
  KILN_CHECK(ls.to_vector() == expected, "the labels {} must have the input's {} shape without its class dim, {}", ls, xs,
             Shape(expected));
  const std::int64_t classes = xs[1];
  const std::string reduction = a.node.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    unsupported("reduction '{}' is not one of none, sum and mean", reduction);
  const std::optional<std::int64_t> ignore =
      a.node.find("ignore_index") ? std::optional(a.node.attr_int("ignore_index", 0)) : std::nullopt;
  // Labels outside [0, C) would gather from another sample; ONNX leaves them undefined, Kiln
  // names the first one.
  for (const std::int64_t label : a.ints(labels_input))
    KILN_CHECK((label >= 0 && label < classes) || label == ignore,
               "label {} is out of range for {} classes (input {}){}", label, classes, xs,
               ignore ? " and is not the ignore_index " + std::to_string(*ignore) : std::string());

  const DType dtype = B::dtype(log_prob);
  const auto device = B::device(log_prob);
  P<B> labels = nn_detail::with_dtype<B>(a[labels_input], DType::i64);
  std::optional<P<B>> ignored;
  if (ignore) {
    // Ignored labels may be any number (negative, or past C): they gather class 0, whose
    // value the weight of 0 below then drops.
    ignored = provided::binary_scalar<B, ops::Equal>(labels, static_cast<double>(*ignore));
    labels = provided::where<B>(*ignored, detail::full<B>(Shape{1}, 0, DType::i64, device), labels);
  }
  Dims at_class = ls.to_vector();
  at_class.insert(at_class.begin() + 1, 1);
  const P<B> picked = B::reshape(B::gather(log_prob, 1, B::reshape(labels, Shape(at_class))), ls);

  // Each position's weight: weight[label], or 1; 0 where the label is ignored.
  P<B> weight = detail::full<B>(ls, 1, dtype, device);
  if (weight_input) {
    KILN_CHECK(a.shape(*weight_input) == Shape{classes}, "the weight {} must hold one value per class ({})",
               a.shape(*weight_input), classes);
    const P<B> flat = B::reshape(labels, Shape{ls.numel()});
    weight = B::reshape(B::gather(nn_detail::with_dtype<B>(a[*weight_input], dtype), 0, flat), ls);
  }
  if (ignored) weight = provided::where<B>(*ignored, detail::full<B>(Shape{1}, 0, dtype, device), weight);
  const P<B> loss = provided::unary<B, ops::Neg>(nn_detail::mul<B>(picked, weight));

  if (reduction == "none") return loss;
  const P<B> sum = B::reshape(provided::reduce_all<B>(loss, ops::ReduceOp::sum), Shape{});
  if (reduction == "sum") return sum;
  // The mean is over the weights of the positions counted (PyTorch's rule): without a
  // weight input, the number of labels not ignored.
  return nn_detail::div<B>(sum, B::reshape(provided::reduce_all<B>(weight, ops::ReduceOp::sum), Shape{}));
}

template <class B> Outs<B> negative_log_likelihood(const Args<B>& a) {
  nn_detail::check_float(a, 0);
  return {nll<B>(a, a[0], 1, nn_detail::given(a, 2) ? std::optional<std::size_t>(2) : std::nullopt)};
}

// The loss of softmax(scores) along the class dim; the log-probabilities are its second output.
template <class B> Outs<B> softmax_cross_entropy(const Args<B>& a) {
  nn_detail::check_float(a, 0);
  KILN_CHECK(a.shape(0).rank() >= 2, "expected scores [N, C] or [N, C, d1, ..., dk], got {}", a.shape(0));
  const P<B> log_prob = nn_detail::softmax<B>(a[0], 1, true);
  Outs<B> outs{nll<B>(a, log_prob, 1, nn_detail::given(a, 2) ? std::optional<std::size_t>(2) : std::nullopt)};
  if (nn_detail::wants(a, 1)) outs.push_back(log_prob);
  return outs;
}

}  // namespace loss_detail

// The op types add_loss_ops registers (checked when a table is built with add_group).
inline constexpr std::string_view kLossOps[] = {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"};
inline constexpr OpGroup kLossGroup{"loss", kLossOps};

template <class B> void add_loss_ops(OpTable<B>& t) {
  // Both ops appeared in opset 12; 13 only adds bfloat16 inputs.
  t["NegativeLogLikelihoodLoss"] = {loss_detail::negative_log_likelihood<B>, 12};
  t["SoftmaxCrossEntropyLoss"] = {loss_detail::softmax_cross_entropy<B>, 12};
}

}  // namespace kiln::onnx
