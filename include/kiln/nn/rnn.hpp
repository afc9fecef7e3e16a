// Recurrent layers with torch.nn's meaning and parameter names, so PyTorch state_dicts
// load as they are: Rnn, Lstm and Gru (torch.nn.RNN / LSTM / GRU: stacked layers, both
// directions, dropout between layers; weight_ih_l0, bias_hh_l1_reverse...) and the single
// steps RnnCell, LstmCell and GruCell (torch.nn.RNNCell / LSTMCell / GRUCell: weight_ih,
// weight_hh, bias_ih, bias_hh).
//
// Unlike PyTorch, batch_first defaults to true, as everywhere in kiln::nn: the input and
// the output are [batch, sequence, features] ([sequence, batch, features] with
// batch_first = false); the states are [num_layers * directions, batch, hidden] either way,
// as in PyTorch.
//
// A layer projects the input of the whole sequence with one matmul (x W_ih^T + b); each time
// step then only adds the recurrent matmul h W_hh^T and the gates, in the cell's step
// function, which the cells' own forward uses too.
#pragma once

#include "kiln/nn/init.hpp"
#include "kiln/nn/layers.hpp"
#include "kiln/nn/module.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::nn {

struct RnnOptions {
  std::int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = true;     // [batch, sequence, features]; false: [sequence, batch, features]
  double dropout = 0;          // on the output of every layer but the last, in training mode
  bool bidirectional = false;  // a second pass over the reversed sequence; outputs concatenated
  std::int64_t proj_size = 0;  // Lstm only: h projected to this size by weight_hr (torch's proj_size); 0: none
};

namespace detail {

// The parameters of a cell with `gates` gates stacked in its weights' rows, and PyTorch's
// initialization: every one uniform in +-1/sqrt(hidden_size).
template <class B, std::int64_t gates> struct RecurrentCell {
  Param<Tensor<B, 2>> weight_ih;               // [gates * hidden, input]
  Param<Tensor<B, 2>> weight_hh;               // [gates * hidden, output] (output: h's size)
  std::optional<Param<Tensor<B, 1>>> bias_ih;  // [gates * hidden]
  std::optional<Param<Tensor<B, 1>>> bias_hh;  // [gates * hidden]
  KILN_MODULE(weight_ih, weight_hh, bias_ih, bias_hh)

  RecurrentCell() = default;
  // output_size: h's size, hidden_size unless an LSTM projects h (0: hidden_size).
  RecurrentCell(std::string_view name, std::int64_t input_size, std::int64_t hidden_size, bool bias,
                const typename B::Device& device, std::int64_t output_size = 0) {
    if (output_size == 0) output_size = hidden_size;
    KILN_CHECK(input_size > 0 && hidden_size > 0, "{}: input_size and hidden_size must be positive, got {} and {}", name,
               input_size, hidden_size);
    const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
    const Init init = Init::uniform(-bound, bound);
    weight_ih = Param(init.template make<B, 2>({gates * hidden_size, input_size}, device));
    weight_hh = Param(init.template make<B, 2>({gates * hidden_size, output_size}, device));
    if (bias) {
      bias_ih.emplace(init.template make<B, 1>({gates * hidden_size}, device));
      bias_hh.emplace(init.template make<B, 1>({gates * hidden_size}, device));
    }
  }

  std::int64_t input_size() const { return weight_ih->dim(1); }
  std::int64_t hidden_size() const { return weight_hh->dim(0) / gates; }
  std::int64_t output_size() const { return weight_hh->dim(1); }  // h's size: hidden_size, or an LSTM's proj_size

 protected:
  // x [..., input] → x W_ih^T + bias [..., gates * hidden], as one 2-d matmul.
  template <std::size_t D> Tensor<B, D> project_with(const Tensor<B, D>& x, const std::optional<Tensor<B, 1>>& bias) const {
    auto dims = x.dims();
    dims[D - 1] = weight_ih->dim(0);
    Tensor<B, D> y = x.template reshape<2>({-1, x.dim(-1)}).matmul(weight_ih->transpose()).template reshape<D>(dims);
    if (bias) y = y + bias->template unsqueeze<D>();
    return y;
  }
  // A cell's input [N, input] and state tensor [N, size] (named `label`, its size `size_name`), checked.
  void check_step(std::string_view name, const Tensor<B, 2>& x, const Tensor<B, 2>* state, std::string_view label,
                  std::int64_t size, std::string_view size_name = "hidden_size") const {
    KILN_CHECK(x.dim(1) == input_size(), "{}: input of shape {} has {} features, expected input_size {}", name, x.shape(),
               x.dim(1), input_size());
    KILN_CHECK(state == nullptr || state->shape() == Shape({x.dim(0), size}),
               "{}: {} of shape {} must be [{}, {}] (batch, {}) for an input of shape {}", name, label, state->shape(),
               x.dim(0), size, size_name, x.shape());
  }
};

}  // namespace detail

// An LSTM cell's state: the hidden state h and the cell state c, [N, hidden] each.
template <class B> struct LstmState {
  Tensor<B, 2> h, c;
};

// One LSTM step (torch.nn.LSTMCell), gates in PyTorch's order i, f, g, o:
//   i, f, o = sigmoid(...), g = tanh(...), c' = f c + i g, h' = o tanh(c').
// Inside an Lstm with proj_size (torch.nn.LSTM's), h' is then projected: h' W_hr^T.
template <class B> struct LstmCell : detail::RecurrentCell<B, 4> {
  using State = LstmState<B>;
  static constexpr std::string_view name = "nn::LstmCell";
  std::optional<Param<Tensor<B, 2>>> weight_hr;  // [proj_size, hidden], with a projection

  template <class W> void visit(W& walker) { visit_with(walker, *this); }
  template <class W> void visit(W& walker) const { visit_with(walker, *this); }

  LstmCell() = default;
  LstmCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true, const typename B::Device& device = {})
      : detail::RecurrentCell<B, 4>(name, input_size, hidden_size, bias, device) {}
  // With h projected to proj_size (none when 0), as in torch.nn.LSTM(proj_size=...).
  LstmCell(std::int64_t input_size, std::int64_t hidden_size, bool bias, std::int64_t proj_size,
           const typename B::Device& device = {})
      : detail::RecurrentCell<B, 4>(name, input_size, hidden_size, bias, device, proj_size) {
    KILN_CHECK(proj_size >= 0 && proj_size < hidden_size, "{}: proj_size must be in [0, hidden_size {}), got {}", name,
               hidden_size, proj_size);
    if (proj_size > 0) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
      weight_hr.emplace(Init::uniform(-bound, bound).template make<B, 2>({proj_size, hidden_size}, device));
    }
  }

  // x [N, input] and the state (zeros when not given) → the next state.
  State forward(const Tensor<B, 2>& x, const std::optional<State>& state = std::nullopt) const {
    this->check_step(name, x, state ? &state->h : nullptr, "h", this->output_size(),
                     weight_hr ? "proj_size" : "hidden_size");
    this->check_step(name, x, state ? &state->c : nullptr, "c", this->hidden_size());
    return step(project(x), state ? *state : zero_state(x.dim(0), x.device(), x.dtype()), this->weight_hh->transpose());
  }

  // The part of the gates that does not depend on the state, for any number of steps at
  // once: x [..., input] → x W_ih^T + b_ih + b_hh [..., 4 hidden].
  template <std::size_t D> Tensor<B, D> project(const Tensor<B, D>& x) const {
    std::optional<Tensor<B, 1>> bias;
    if (this->bias_ih) bias = this->bias_ih->val() + this->bias_hh->val();
    return this->project_with(x, bias);
  }
  // One step from a projected input [N, 4 hidden]; weight_hh_t is W_hh^T (made once per sequence).
  State step(const Tensor<B, 2>& projected, const State& state, const Tensor<B, 2>& weight_hh_t) const {
    const std::vector<Tensor<B, 2>> gates = (projected + state.h.matmul(weight_hh_t)).chunk(4, 1);
    const Tensor<B, 2> c = gates[1].sigmoid() * state.c + gates[0].sigmoid() * gates[2].tanh();
    const Tensor<B, 2> h = gates[3].sigmoid() * c.tanh();
    return {weight_hr ? h.matmul((*weight_hr)->transpose()) : h, c};
  }
  static const Tensor<B, 2>& hidden(const State& state) { return state.h; }
  State zero_state(std::int64_t batch, const typename B::Device& device, DType dtype) const {
    return {Tensor<B, 2>::zeros({batch, this->output_size()}, device, dtype),
            Tensor<B, 2>::zeros({batch, this->hidden_size()}, device, dtype)};
  }

 private:
  template <class W, class Self> static void visit_with(W& walker, Self& self) {
    static_cast<std::conditional_t<std::is_const_v<Self>, const detail::RecurrentCell<B, 4>, detail::RecurrentCell<B, 4>>&>(
        self)
        .visit(walker);
    walker.field("weight_hr", self.weight_hr);
  }
};

// One GRU step (torch.nn.GRUCell), gates in PyTorch's order r, z, n:
//   r, z = sigmoid(W_i x + b_i + W_h h + b_h), n = tanh(W_in x + b_in + r (W_hn h + b_hn)),
//   h' = (1 - z) n + z h.
template <class B> struct GruCell : detail::RecurrentCell<B, 3> {
  using State = Tensor<B, 2>;  // h [N, hidden]
  static constexpr std::string_view name = "nn::GruCell";

  GruCell() = default;
  GruCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true, const typename B::Device& device = {})
      : detail::RecurrentCell<B, 3>(name, input_size, hidden_size, bias, device) {}

  // x [N, input] and h [N, hidden] (zeros when not given) → the next h.
  Tensor<B, 2> forward(const Tensor<B, 2>& x, const std::optional<Tensor<B, 2>>& h = std::nullopt) const {
    this->check_step(name, x, h ? &*h : nullptr, "h", this->hidden_size());
    return step(project(x), h ? *h : zero_state(x.dim(0), x.device(), x.dtype()), this->weight_hh->transpose());
  }

  // x [..., input] → x W_ih^T + b_ih [..., 3 hidden] (b_hh stays in the step: r scales b_hn).
  template <std::size_t D> Tensor<B, D> project(const Tensor<B, D>& x) const {
    return this->project_with(x, this->bias_ih ? std::optional(this->bias_ih->val()) : std::nullopt);
  }
  State step(const Tensor<B, 2>& projected, const State& h, const Tensor<B, 2>& weight_hh_t) const {
    Tensor<B, 2> recurrent = h.matmul(weight_hh_t);
    if (this->bias_hh) recurrent = recurrent + (*this->bias_hh)->template unsqueeze<2>();
    const std::vector<Tensor<B, 2>> in = projected.chunk(3, 1), rec = recurrent.chunk(3, 1);
    const Tensor<B, 2> r = (in[0] + rec[0]).sigmoid(), z = (in[1] + rec[1]).sigmoid();
    const Tensor<B, 2> n = (in[2] + r * rec[2]).tanh();
    return n + z * (h - n);
  }
  static const Tensor<B, 2>& hidden(const State& h) { return h; }
  State zero_state(std::int64_t batch, const typename B::Device& device, DType dtype) const {
    return Tensor<B, 2>::zeros({batch, this->hidden_size()}, device, dtype);
  }
};

// The activation of an Elman RNN (torch's nonlinearity "tanh" or "relu").
enum class RnnNonlinearity { tanh, relu };

// One Elman RNN step (torch.nn.RNNCell): h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh).
template <class B> struct RnnCell : detail::RecurrentCell<B, 1> {
  using State = Tensor<B, 2>;  // h [N, hidden]
  static constexpr std::string_view name = "nn::RnnCell";
  RnnNonlinearity nonlinearity = RnnNonlinearity::tanh;

  template <class W> void visit(W& walker) { visit_with(walker, *this); }
  template <class W> void visit(W& walker) const { visit_with(walker, *this); }

  RnnCell() = default;
  RnnCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true,
          RnnNonlinearity nonlinearity_ = RnnNonlinearity::tanh, const typename B::Device& device = {})
      : detail::RecurrentCell<B, 1>(name, input_size, hidden_size, bias, device), nonlinearity(nonlinearity_) {}

  // x [N, input] and h [N, hidden] (zeros when not given) → the next h.
  Tensor<B, 2> forward(const Tensor<B, 2>& x, const std::optional<Tensor<B, 2>>& h = std::nullopt) const {
    this->check_step(name, x, h ? &*h : nullptr, "h", this->hidden_size());
    return step(project(x), h ? *h : zero_state(x.dim(0), x.device(), x.dtype()), this->weight_hh->transpose());
  }

  // x [..., input] → x W_ih^T + b_ih + b_hh [..., hidden].
  template <std::size_t D> Tensor<B, D> project(const Tensor<B, D>& x) const {
    std::optional<Tensor<B, 1>> bias;
    if (this->bias_ih) bias = this->bias_ih->val() + this->bias_hh->val();
    return this->project_with(x, bias);
  }
  State step(const Tensor<B, 2>& projected, const State& h, const Tensor<B, 2>& weight_hh_t) const {
    const Tensor<B, 2> z = projected + h.matmul(weight_hh_t);
    return nonlinearity == RnnNonlinearity::relu ? z.relu() : z.tanh();
  }
  static const Tensor<B, 2>& hidden(const State& h) { return h; }
  State zero_state(std::int64_t batch, const typename B::Device& device, DType dtype) const {
    return Tensor<B, 2>::zeros({batch, this->hidden_size()}, device, dtype);
  }

 private:
  template <class W, class Self> static void visit_with(W& walker, Self& self) {
    static_cast<std::conditional_t<std::is_const_v<Self>, const detail::RecurrentCell<B, 1>, detail::RecurrentCell<B, 1>>&>(
        self)
        .visit(walker);
    walker.field("nonlinearity", self.nonlinearity);
  }
};

namespace detail {

// A stack of cells over a sequence: what Lstm and Gru share. `name` is the layer's name in errors.
template <class B, class Cell> struct RecurrentStack {
  std::vector<Cell> cells;  // layer k, direction d at k * directions + d: PyTorch's order of h_n
  Dropout<B> dropout;       // between layers
  std::int64_t num_layers = 0;
  bool bidirectional = false, batch_first = true;

  // PyTorch's names: weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, then the
  // same with _reverse for the backward direction, layer by layer.
  template <class W> void visit(W& walker) { visit_cells(walker, *this); }
  template <class W> void visit(W& walker) const { visit_cells(walker, *this); }

  RecurrentStack() = default;
  // cell_args go to each cell's constructor between its bias and its device.
  template <class... CellArgs>
  RecurrentStack(std::string_view name, std::int64_t input_size, std::int64_t hidden_size, const RnnOptions& options,
                 const typename B::Device& device, const CellArgs&... cell_args)
      : num_layers(options.num_layers), bidirectional(options.bidirectional), batch_first(options.batch_first) {
    KILN_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0,
               "{}: input_size, hidden_size and num_layers must be positive, got {}, {} and {}", name, input_size,
               hidden_size, num_layers);
    KILN_CHECK(options.dropout >= 0 && options.dropout <= 1, "{}: dropout must be in [0, 1], got {}", name,
               options.dropout);
    constexpr bool projects = requires(Cell& cell) { cell.weight_hr; };
    KILN_CHECK(options.proj_size == 0 || projects, "{}: proj_size is for nn::Lstm only, got {}", name, options.proj_size);
    KILN_CHECK(options.proj_size >= 0 && options.proj_size < hidden_size,
               "{}: proj_size must be in [0, hidden_size {}), got {}", name, hidden_size, options.proj_size);
    dropout = Dropout<B>(options.dropout);
    const std::int64_t output_size = options.proj_size > 0 ? options.proj_size : hidden_size;
    for (std::int64_t layer = 0; layer < num_layers; ++layer)
      for (std::int64_t d = 0; d < directions(); ++d)
        cells.emplace_back(layer == 0 ? input_size : directions() * output_size, hidden_size, options.bias, cell_args...,
                           device);
  }

  std::int64_t directions() const { return bidirectional ? 2 : 1; }
  std::int64_t input_size() const { return cells.at(0).input_size(); }
  std::int64_t hidden_size() const { return cells.at(0).hidden_size(); }
  std::int64_t output_size() const { return cells.at(0).output_size(); }  // h's size

 protected:
  // The input, checked: [N, L, input_size] (batch_first) or [L, N, input_size], L > 0.
  void check_input(std::string_view name, const Tensor<B, 3>& x) const {
    KILN_CHECK(!cells.empty(), "{}: the module has no layers (it was default-constructed: make one with its sizes, "
               "then nn::load_state_dict the weights)", name);
    KILN_CHECK(x.dim(2) == input_size(), "{}: input of shape {} has {} features in its last dim, expected input_size {}",
               name, x.shape(), x.dim(2), input_size());
    KILN_CHECK(x.dim(batch_first ? 1 : 0) > 0, "{}: input of shape {} has an empty sequence (batch_first = {})", name,
               x.shape(), batch_first);
  }
  // A [num_layers * directions, N, hidden] initial state as one [N, hidden] tensor per cell.
  // Its size is h's (output_size(), named proj_size when it is not hidden_size) or c's (hidden_size).
  std::vector<Tensor<B, 2>> split_state(std::string_view name, std::string_view label, const Tensor<B, 3>& x,
                                        const Tensor<B, 3>& state, bool is_c = false) const {
    const std::int64_t size = is_c ? hidden_size() : output_size();
    const std::string_view size_name = size == hidden_size() ? "hidden_size" : "proj_size";
    const std::int64_t batch = x.dim(batch_first ? 0 : 1);
    const auto count = static_cast<std::int64_t>(cells.size());
    KILN_CHECK(state.shape() == Shape({count, batch, size}),
               "{}: {} of shape {} must be [{}, {}, {}] (num_layers * directions, batch, {}) for an input of shape {}",
               name, label, state.shape(), count, batch, size, size_name, x.shape());
    std::vector<Tensor<B, 2>> out;
    for (std::int64_t i = 0; i < count; ++i) out.push_back(state.narrow(0, i, 1).squeeze_dim(0));
    return out;
  }

  // Each cell's state at zero, for the input x.
  typename Cell::State zero_state(const Tensor<B, 3>& x) const {
    return cells[0].zero_state(x.dim(batch_first ? 0 : 1), x.device(), x.dtype());
  }

  // Runs the stack over x (checked); `states` holds each cell's initial state and gets its final one.
  Tensor<B, 3> run(Tensor<B, 3> x, std::vector<typename Cell::State>& states) const {
    const std::int64_t time = batch_first ? 1 : 0, steps = x.dim(time);
    for (std::int64_t layer = 0; layer < num_layers; ++layer) {
      if (layer > 0) x = dropout.forward(x);
      std::vector<Tensor<B, 3>> directions_out;
      for (std::int64_t d = 0; d < directions(); ++d) {
        const auto i = static_cast<std::size_t>(layer * directions() + d);
        const Cell& cell = cells[i];
        const Tensor<B, 3> projected = cell.project(x);  // every step's input at once
        const Tensor<B, 2> weight_hh_t = cell.weight_hh->transpose();
        std::vector<Tensor<B, 3>> hidden;  // in step order
        for (std::int64_t s = 0; s < steps; ++s) {
          const std::int64_t t = d == 0 ? s : steps - 1 - s;
          states[i] = cell.step(projected.narrow(time, t, 1).squeeze_dim(time), states[i], weight_hh_t);
          hidden.push_back(Cell::hidden(states[i]).unsqueeze_dim(time));
        }
        if (d == 1) std::reverse(hidden.begin(), hidden.end());
        directions_out.push_back(Tensor<B, 3>::cat(hidden, time));
      }
      x = directions_out.size() == 1 ? directions_out[0] : Tensor<B, 3>::cat(directions_out, 2);
    }
    return x;
  }

  // For cells whose state is h alone (Rnn, Gru): the output and h_n from h_0 (zeros when null).
  std::pair<Tensor<B, 3>, Tensor<B, 3>> run_from(std::string_view name, const Tensor<B, 3>& x,
                                                 const Tensor<B, 3>* h_0) const {
    check_input(name, x);
    std::vector<Tensor<B, 2>> states;
    if (h_0 != nullptr) {
      states = split_state(name, "h_0", x, *h_0);
    } else {
      states.assign(cells.size(), zero_state(x));
    }
    Tensor<B, 3> output = run(x, states);
    return {std::move(output), stack(states, 0)};
  }

 private:
  template <class W, class Self> static void visit_cells(W& walker, Self& self) {
    walker.field("num_layers", self.num_layers);
    walker.field("bidirectional", self.bidirectional);
    walker.field("batch_first", self.batch_first);
    walker.sized("cells", self.cells);
    for (std::size_t i = 0; i < self.cells.size(); ++i) {
      const auto layer = static_cast<std::int64_t>(i) / self.directions();
      const std::string suffix = fmt::format("_l{}{}", layer, i % 2 == 1 && self.bidirectional ? "_reverse" : "");
      auto& cell = self.cells[i];
      walker.field("weight_ih" + suffix, cell.weight_ih);
      walker.field("weight_hh" + suffix, cell.weight_hh);
      walker.field("bias_ih" + suffix, cell.bias_ih);
      walker.field("bias_hh" + suffix, cell.bias_hh);
      if constexpr (requires { cell.weight_hr; }) walker.field("weight_hr" + suffix, cell.weight_hr);
    }
    walker.field("dropout", self.dropout);
  }
};

}  // namespace detail

// What Lstm::forward returns: output [N, L, directions * hidden] (batch_first; else
// [L, N, ...]), the last hidden and cell states h_n, c_n [num_layers * directions, N, hidden].
// With proj_size, output and h_n have proj_size features in place of hidden.
template <class B> struct LstmOutput {
  Tensor<B, 3> output, h_n, c_n;
};

// torch.nn.LSTM: a stack of LstmCells, parameters named as PyTorch's.
template <class B> struct Lstm : detail::RecurrentStack<B, LstmCell<B>> {
  static constexpr std::string_view name = "nn::Lstm";

  Lstm() = default;
  Lstm(std::int64_t input_size, std::int64_t hidden_size, const RnnOptions& options = {},
       const typename B::Device& device = {})
      : detail::RecurrentStack<B, LstmCell<B>>(name, input_size, hidden_size, options, device, options.proj_size) {}

  // x [N, L, input_size] (batch_first) or [L, N, input_size]; the states start at zero.
  LstmOutput<B> forward(const Tensor<B, 3>& x) const { return forward_from(x, nullptr, nullptr); }
  // The same from initial states h_0, c_0 [num_layers * directions, N, hidden].
  LstmOutput<B> forward(const Tensor<B, 3>& x, const Tensor<B, 3>& h_0, const Tensor<B, 3>& c_0) const {
    return forward_from(x, &h_0, &c_0);
  }

 private:
  LstmOutput<B> forward_from(const Tensor<B, 3>& x, const Tensor<B, 3>* h_0, const Tensor<B, 3>* c_0) const {
    this->check_input(name, x);
    std::vector<LstmState<B>> states;
    if (h_0 != nullptr) {
      const auto h = this->split_state(name, "h_0", x, *h_0), c = this->split_state(name, "c_0", x, *c_0, true);
      for (std::size_t i = 0; i < h.size(); ++i) states.push_back({h[i], c[i]});
    } else {
      states.assign(this->cells.size(), this->zero_state(x));
    }
    Tensor<B, 3> output = this->run(x, states);
    std::vector<Tensor<B, 2>> h, c;
    for (const auto& s : states) {
      h.push_back(s.h);
      c.push_back(s.c);
    }
    return {std::move(output), stack(h, 0), stack(c, 0)};
  }
};

// What Gru::forward returns: output and h_n, shaped as Lstm's.
template <class B> struct GruOutput {
  Tensor<B, 3> output, h_n;
};

// torch.nn.GRU: a stack of GruCells, parameters named as PyTorch's.
template <class B> struct Gru : detail::RecurrentStack<B, GruCell<B>> {
  static constexpr std::string_view name = "nn::Gru";

  Gru() = default;
  Gru(std::int64_t input_size, std::int64_t hidden_size, const RnnOptions& options = {},
      const typename B::Device& device = {})
      : detail::RecurrentStack<B, GruCell<B>>(name, input_size, hidden_size, options, device) {}

  // x [N, L, input_size] (batch_first) or [L, N, input_size]; h starts at zero.
  GruOutput<B> forward(const Tensor<B, 3>& x) const { return forward_from(x, nullptr); }
  // The same from an initial state h_0 [num_layers * directions, N, hidden].
  GruOutput<B> forward(const Tensor<B, 3>& x, const Tensor<B, 3>& h_0) const { return forward_from(x, &h_0); }

 private:
  GruOutput<B> forward_from(const Tensor<B, 3>& x, const Tensor<B, 3>* h_0) const {
    auto [output, h_n] = this->run_from(name, x, h_0);
    return {std::move(output), std::move(h_n)};
  }
};

// What Rnn::forward returns: output and h_n, shaped as Lstm's.
template <class B> struct RnnOutput {
  Tensor<B, 3> output, h_n;
};

// torch.nn.RNN: a stack of Elman RnnCells (tanh or relu), parameters named as PyTorch's.
template <class B> struct Rnn : detail::RecurrentStack<B, RnnCell<B>> {
  static constexpr std::string_view name = "nn::Rnn";
  RnnNonlinearity nonlinearity = RnnNonlinearity::tanh;  // every cell's, kept in step with them

  template <class W> void visit(W& walker) {
    detail::RecurrentStack<B, RnnCell<B>>::visit(walker);
    walker.field("nonlinearity", nonlinearity);
    for (auto& cell : this->cells) cell.nonlinearity = nonlinearity;
  }
  template <class W> void visit(W& walker) const {
    detail::RecurrentStack<B, RnnCell<B>>::visit(walker);
    walker.field("nonlinearity", nonlinearity);
  }

  Rnn() = default;
  Rnn(std::int64_t input_size, std::int64_t hidden_size, const RnnOptions& options = {},
      RnnNonlinearity nonlinearity_ = RnnNonlinearity::tanh, const typename B::Device& device = {})
      : detail::RecurrentStack<B, RnnCell<B>>(name, input_size, hidden_size, options, device, nonlinearity_),
        nonlinearity(nonlinearity_) {}

  // x [N, L, input_size] (batch_first) or [L, N, input_size]; h starts at zero.
  RnnOutput<B> forward(const Tensor<B, 3>& x) const { return forward_from(x, nullptr); }
  // The same from an initial state h_0 [num_layers * directions, N, hidden].
  RnnOutput<B> forward(const Tensor<B, 3>& x, const Tensor<B, 3>& h_0) const { return forward_from(x, &h_0); }

 private:
  RnnOutput<B> forward_from(const Tensor<B, 3>& x, const Tensor<B, 3>* h_0) const {
    auto [output, h_n] = this->run_from(name, x, h_0);
    return {std::move(output), std::move(h_n)};
  }
};

}  // namespace kiln::nn
