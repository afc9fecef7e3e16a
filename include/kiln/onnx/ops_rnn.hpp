// ONNX's recurrent layers, RNN, GRU and LSTM: forward, reverse and bidirectional, built
// per time step from matmuls, elementwise gates and slices (kiln/onnx/ops_nn.hpp's helpers).
#pragma once

#include "kiln/onnx/ops_nn.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::onnx {

namespace nn_detail {
// ---------------------------------------------------------------- RNN, GRU, LSTM

enum class Cell { rnn, gru, lstm };

template <class B> using Activation = P<B> (*)(const P<B>&);
template <class B> P<B> sigmoid(const P<B>& x) { return provided::unary<B, ops::Sigmoid>(x); }
template <class B> P<B> tanh(const P<B>& x) { return provided::unary<B, ops::Tanh>(x); }
template <class B> P<B> relu(const P<B>& x) { return provided::unary<B, ops::Relu>(x); }

template <class B> Activation<B> activation(const std::string& name) {
  if (name == "Sigmoid") return sigmoid<B>;
  if (name == "Tanh") return tanh<B>;
  if (name == "Relu") return relu<B>;
  unsupported("the recurrent activation {} (Kiln runs Sigmoid, Tanh and Relu)", name);
}

// One direction's weights, sliced from the [directions, ...] inputs: W^T [I, G H] and R^T
// [H, G H], the input bias Wb + Rb (GRU keeps Rb's candidate part apart), and peepholes.
template <class B> struct Direction {
  P<B> w_t, r_t;
  std::optional<P<B>> bias, candidate_bias, peephole;
  std::vector<Activation<B>> f;  // f, g, h as ONNX names them
};

// RNN, GRU and LSTM over a whole sequence, one step at a time: the input projections of all
// steps are one matmul per direction, each step a matmul by R^T and elementwise gate math.
template <class B> Outs<B> recurrent(const Args<B>& a, Cell cell) {
  check_float(a, 0);
  const DType dtype = a.dtype(0);
  const std::size_t gates = cell == Cell::lstm ? 4 : cell == Cell::gru ? 3 : 1;
  const std::int64_t hidden = a.node.attr_int("hidden_size", 0);
  const bool batch_first = a.node.attr_int("layout", 0) != 0;
  const std::string direction = a.node.attr_string("direction", "forward");
  KILN_CHECK(direction == "forward" || direction == "reverse" || direction == "bidirectional",
             "direction must be forward, reverse or bidirectional, got '{}'", direction);
  const std::int64_t directions = direction == "bidirectional" ? 2 : 1;
  const bool linear_before_reset = a.node.attr_int("linear_before_reset", 0) != 0;
  // clip bounds the activations' inputs to [-clip, clip].
  const std::optional<double> clip =
      a.node.find("clip") ? std::optional(a.node.attr_float("clip", 0.0)) : std::nullopt;
  if (a.node.attr_int("input_forget", 0) != 0) unsupported("LSTM with input_forget 1");

  const std::array<std::int64_t, 3> swap01{1, 0, 2};
  const P<B> x = batch_first ? B::permute(a[0], swap01) : a[0];
  const Shape xs = B::shape(x), ws = a.shape(1), rs = a.shape(2);
  KILN_CHECK(xs.rank() == 3, "X must be 3-d, got {}", a.shape(0));
  const std::int64_t steps = xs[0], batch = xs[1], inputs = xs[2], gh = static_cast<std::int64_t>(gates) * hidden;
  KILN_CHECK(hidden >= 1, "hidden_size must be positive, got {}", hidden);
  KILN_CHECK(ws == Shape({directions, gh, inputs}), "W must be [{}, {}, {}] for X {}, got {}", directions, gh, inputs,
             a.shape(0), ws);
  KILN_CHECK(rs == Shape({directions, gh, hidden}), "R must be [{}, {}, {}], got {}", directions, gh, hidden, rs);
  if (given(a, 3))
    KILN_CHECK(a.shape(3) == Shape({directions, 2 * gh}), "B must be [{}, {}], got {}", directions, 2 * gh, a.shape(3));
  if (given(a, 4)) {
    for (const std::int64_t length : a.ints(4))
      if (length != steps) unsupported("sequence_lens shorter than the sequence ({} of {} steps)", length, steps);
  }
  // A state input [directions, batch, H] (batch first with layout 1), or zeros.
  const auto state = [&](std::size_t i) {
    if (!given(a, i)) return provided::full<B>(Shape{directions, batch, hidden}, 0.0, dtype, a.device);
    const P<B> s = batch_first ? B::permute(a[i], swap01) : a[i];
    KILN_CHECK(B::shape(s) == Shape({directions, batch, hidden}), "input {} must be [{}, {}, {}], got {}", i,
               directions, batch, hidden, a.shape(i));
    return s;
  };
  const P<B> h0 = state(5), c0 = cell == Cell::lstm ? state(6) : h0;
  if (cell == Cell::lstm && given(a, 7))
    KILN_CHECK(a.shape(7) == Shape({directions, 3 * hidden}), "P must be [{}, {}], got {}", directions, 3 * hidden,
               a.shape(7));

  const std::vector<std::string> names = a.node.attr_strings("activations");
  const std::size_t per_direction = cell == Cell::lstm ? 3 : cell == Cell::gru ? 2 : 1;
  KILN_CHECK(names.empty() || names.size() == per_direction * directions,
             "activations lists {} functions, expected {}", names.size(), per_direction * directions);
  const std::array<const char*, 3> defaults{cell == Cell::rnn ? "Tanh" : "Sigmoid", "Tanh", "Tanh"};

  const std::array<std::int64_t, 2> swap{1, 0};
  const auto row = [](const P<B>& t, std::int64_t d) { return erase_dim<B>(slice_dim<B>(t, 0, d, 1), 0); };
  std::vector<P<B>> ys, last_h, last_c;
  for (std::int64_t d = 0; d < directions; ++d) {
    Direction<B> dir{B::permute(row(a[1], d), swap), B::permute(row(a[2], d), swap), {}, {}, {}, {}};
    for (std::size_t k = 0; k < per_direction; ++k)
      dir.f.push_back(names.empty() ? activation<B>(defaults[k]) : activation<B>(names[d * per_direction + k]));
    if (given(a, 3)) {
      const P<B> b = with_dtype<B>(row(a[3], d), dtype);
      const P<B> wb = slice_dim<B>(b, 0, 0, gh), rb = slice_dim<B>(b, 0, gh, gh);
      if (cell == Cell::gru) {
        // The candidate's recurrent bias sits inside the reset gate's product.
        const P<B> zr = slice_dim<B>(rb, 0, 0, 2 * hidden);
        const P<B> zero = provided::full<B>(Shape{hidden}, 0.0, dtype, a.device);
        const std::array<P<B>, 2> parts{zr, zero};
        dir.bias = add<B>(wb, provided::cat<B>(parts, 0));
        dir.candidate_bias = slice_dim<B>(rb, 0, 2 * hidden, hidden);
      } else {
        dir.bias = add<B>(wb, rb);
      }
    }
    if (cell == Cell::lstm && given(a, 7)) dir.peephole = with_dtype<B>(row(a[7], d), dtype);

    // Input projections of every step at once: [steps * batch, I] @ W^T.
    P<B> projected = B::matmul(B::reshape(x, Shape{steps * batch, inputs}), dir.w_t);
    if (dir.bias) projected = add<B>(projected, *dir.bias);
    projected = B::reshape(projected, Shape{steps, batch, gh});
    P<B> h = row(h0, d), c = row(c0, d);
    const auto act = [&](std::size_t k, const P<B>& v) {
      if (!clip) return dir.f[k](v);
      const P<B> above = provided::binary_scalar<B, ops::Maximum>(v, -*clip);
      return dir.f[k](provided::binary_scalar<B, ops::Minimum>(above, *clip));
    };
    // GRU's R^T, split into the z and r gates' columns and the candidate's.
    const P<B> r_t_zr = cell == Cell::gru ? slice_dim<B>(dir.r_t, 1, 0, 2 * hidden) : dir.r_t;
    const P<B> r_t_h = cell == Cell::gru ? slice_dim<B>(dir.r_t, 1, 2 * hidden, hidden) : dir.r_t;
    const auto gate = [&](const P<B>& g, std::int64_t k) { return slice_dim<B>(g, 1, k * hidden, hidden); };
    const auto peep = [&](std::int64_t k) { return slice_dim<B>(*dir.peephole, 0, k * hidden, hidden); };
    std::vector<P<B>> outputs(static_cast<std::size_t>(steps));
    const bool reverse = direction == "reverse" || d == 1;
    for (std::int64_t i = 0; i < steps; ++i) {
      const std::int64_t t = reverse ? steps - 1 - i : i;
      const P<B> xt = row(projected, t);
      if (cell == Cell::rnn) {
        h = act(0, add<B>(xt, B::matmul(h, dir.r_t)));
      } else if (cell == Cell::lstm) {
        // Gates i, o, f and the cell candidate, in ONNX's order; peepholes p_i, p_o, p_f.
        const P<B> g = add<B>(xt, B::matmul(h, dir.r_t));
        P<B> in = gate(g, 0), out = gate(g, 1), forget = gate(g, 2);
        if (dir.peephole) {
          in = add<B>(in, mul<B>(peep(0), c));
          forget = add<B>(forget, mul<B>(peep(2), c));
        }
        c = add<B>(mul<B>(act(0, forget), c), mul<B>(act(0, in), act(1, gate(g, 3))));
        if (dir.peephole) out = add<B>(out, mul<B>(peep(1), c));
        h = mul<B>(act(0, out), act(2, c));
      } else {
        // Gates z, r and the candidate; linear_before_reset applies r after R_h's product.
        const P<B> zr = add<B>(slice_dim<B>(xt, 1, 0, 2 * hidden), B::matmul(h, r_t_zr));
        const P<B> z = act(0, gate(zr, 0)), r = act(0, gate(zr, 1));
        P<B> recurrent_h = linear_before_reset ? B::matmul(h, r_t_h) : B::matmul(mul<B>(r, h), r_t_h);
        if (dir.candidate_bias) recurrent_h = add<B>(recurrent_h, *dir.candidate_bias);
        if (linear_before_reset) recurrent_h = mul<B>(r, recurrent_h);
        const P<B> candidate = act(1, add<B>(gate(xt, 2), recurrent_h));
        // h = (1 - z) * candidate + z * h, as candidate + z * (h - candidate).
        h = add<B>(candidate, mul<B>(z, sub<B>(h, candidate)));
      }
      outputs[static_cast<std::size_t>(t)] = B::reshape(h, Shape{1, 1, batch, hidden});
    }
    ys.push_back(provided::cat<B>(outputs, 0));
    last_h.push_back(B::reshape(h, Shape{1, batch, hidden}));
    last_c.push_back(B::reshape(c, Shape{1, batch, hidden}));
  }
  P<B> y = provided::cat<B>(ys, 1), y_h = provided::cat<B>(last_h, 0), y_c = provided::cat<B>(last_c, 0);
  if (batch_first) {
    const std::array<std::int64_t, 4> to_batch_first{2, 0, 1, 3};
    y = B::permute(y, to_batch_first);
    y_h = B::permute(y_h, swap01);
    y_c = B::permute(y_c, swap01);
  }
  Outs<B> outs{y, y_h};
  if (cell == Cell::lstm) outs.push_back(y_c);
  return outs;
}

}  // namespace nn_detail

// The op types add_rnn_ops registers (checked when a table is built): a module that
// kiln-onnx2cpp generates takes only the groups its graph uses.
inline constexpr std::string_view kRnnOps[] = {
    "RNN", "GRU", "LSTM"};
inline constexpr OpGroup kRnnGroup{"rnn", kRnnOps};

template <class B> void add_rnn_ops(OpTable<B>& t) {
  using namespace nn_detail;
  t["RNN"] = {[](const Args<B>& a) { return recurrent(a, Cell::rnn); }};
  t["GRU"] = {[](const Args<B>& a) { return recurrent(a, Cell::gru); }};
  t["LSTM"] = {[](const Args<B>& a) { return recurrent(a, Cell::lstm); }};
}

}  // namespace kiln::onnx
