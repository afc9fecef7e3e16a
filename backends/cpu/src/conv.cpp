// 2-d convolution on the CPU (NCHW, weight [out, in/groups, kh, kw]): forward, input
// gradient and weight gradient. f32 runs through oneDNN primitives, cached per geometry;
// f64 (and degenerate shapes) through direct reference loops; f16/bf16 compute in f32.
#include "internal.hpp"
#include "gemm.hpp"
#include "post_ops.hpp"
#if KILN_CPU_ONEDNN
#include "onednn.hpp"

#include <oneapi/dnnl/dnnl.hpp>
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#if !KILN_CPU_ONEDNN
#include <Eigen/Core>
#endif

namespace kiln::cpu {
namespace {

// KILN_CONV_ALGORITHM: "direct", or "auto" (the default; a warning for anything else).
ConvAlgorithm conv_algorithm_from_environment() {
  const char* text = std::getenv("KILN_CONV_ALGORITHM");
  if (text == nullptr || *text == '\0' || std::string_view(text) == "auto") return ConvAlgorithm::automatic;
  if (std::string_view(text) == "direct") return ConvAlgorithm::direct;
  std::fprintf(stderr, "kiln: KILN_CONV_ALGORITHM='%s' is neither auto nor direct; using auto\n", text);
  return ConvAlgorithm::automatic;
}

std::atomic<ConvAlgorithm>& conv_algorithm_setting() {
  static std::atomic<ConvAlgorithm> setting{conv_algorithm_from_environment()};
  return setting;
}

// Every extent of one convolution, validated.
struct ConvGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;  // input
  std::int64_t o = 0, kh = 0, kw = 0;       // weight [o, c / groups, kh, kw]
  std::int64_t oh = 0, ow = 0;              // output
  std::int64_t groups = 1;
  std::array<std::int64_t, 2> stride{}, padding{}, dilation{};

  std::int64_t cg() const { return c / groups; }
  std::int64_t og() const { return o / groups; }
  Shape x_shape() const { return Shape{n, c, h, w}; }
  Shape w_shape() const { return Shape{o, cg(), kh, kw}; }
  Shape y_shape() const { return Shape{n, o, oh, ow}; }
};

ConvGeometry conv_geometry(std::string_view op, const Shape& x, const Shape& w, const ops::Conv2dOptions& opt) {
  const Shape y = ops::conv_output_shape(op, x, w, opt.stride, opt.padding, opt.dilation, opt.groups);
  ConvGeometry g;
  g.n = x[0], g.c = x[1], g.h = x[2], g.w = x[3];
  g.o = w[0], g.kh = w[2], g.kw = w[3];
  g.oh = y[2], g.ow = y[3];
  g.groups = opt.groups;
  g.stride = opt.stride, g.padding = opt.padding, g.dilation = opt.dilation;
  return g;
}

// ---------------------------------------------------------------- reference loops
// Direct definitions of the three convolutions, correct for every option: the f64 path,
// and the ground truth that the oneDNN path is tested against.

template <class T> void conv_forward_ref(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  const std::int64_t cg = g.cg(), og = g.og();
  parallel_for(g.n * g.o, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t ni = item / g.o, oc = item % g.o, c0 = oc / og * cg;
      T* yp = y + item * g.oh * g.ow;
      for (std::int64_t oy = 0; oy < g.oh; ++oy) {
        for (std::int64_t ox = 0; ox < g.ow; ++ox) {
          T acc = bias ? bias[oc] : T(0);
          for (std::int64_t ic = 0; ic < cg; ++ic) {
            const T* xp = x + ((ni * g.c + c0 + ic) * g.h) * g.w;
            const T* wp = w + (oc * cg + ic) * g.kh * g.kw;
            for (std::int64_t ky = 0; ky < g.kh; ++ky) {
              const std::int64_t iy = oy * g.stride[0] - g.padding[0] + ky * g.dilation[0];
              if (iy < 0 || iy >= g.h) continue;
              for (std::int64_t kx = 0; kx < g.kw; ++kx) {
                const std::int64_t ix = ox * g.stride[1] - g.padding[1] + kx * g.dilation[1];
                if (ix < 0 || ix >= g.w) continue;
                acc += xp[iy * g.w + ix] * wp[ky * g.kw + kx];
              }
            }
          }
          yp[oy * g.ow + ox] = acc;
        }
      }
    }
  });
}

// Output row/column `o` that input position `i` meets through kernel tap `k`, or -1.
inline std::int64_t source_index(std::int64_t i, std::int64_t k, std::int64_t stride, std::int64_t padding,
                                 std::int64_t dilation, std::int64_t out) {
  const std::int64_t t = i + padding - k * dilation;
  if (t < 0 || t % stride != 0) return -1;
  const std::int64_t o = t / stride;
  return o < out ? o : -1;
}

template <class T> void conv_backward_input_ref(const ConvGeometry& g, const T* dy, const T* w, T* dx) {
  const std::int64_t cg = g.cg(), og = g.og();
  parallel_for(g.n * g.c, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t ni = item / g.c, ci = item % g.c, grp = ci / cg, ic = ci % cg;
      T* dxp = dx + item * g.h * g.w;
      for (std::int64_t iy = 0; iy < g.h; ++iy) {
        for (std::int64_t ix = 0; ix < g.w; ++ix) {
          T acc = T(0);
          for (std::int64_t ky = 0; ky < g.kh; ++ky) {
            const std::int64_t oy = source_index(iy, ky, g.stride[0], g.padding[0], g.dilation[0], g.oh);
            if (oy < 0) continue;
            for (std::int64_t kx = 0; kx < g.kw; ++kx) {
              const std::int64_t ox = source_index(ix, kx, g.stride[1], g.padding[1], g.dilation[1], g.ow);
              if (ox < 0) continue;
              for (std::int64_t oc = grp * og; oc < (grp + 1) * og; ++oc)
                acc += dy[((ni * g.o + oc) * g.oh + oy) * g.ow + ox] * w[((oc * cg + ic) * g.kh + ky) * g.kw + kx];
            }
          }
          dxp[iy * g.w + ix] = acc;
        }
      }
    }
  });
}

template <class T> void conv_backward_weight_ref(const ConvGeometry& g, const T* x, const T* dy, T* dw) {
  const std::int64_t cg = g.cg(), og = g.og();
  parallel_for(g.o * cg, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t oc = item / cg, ic = item % cg, ci = oc / og * cg + ic;
      for (std::int64_t ky = 0; ky < g.kh; ++ky) {
        for (std::int64_t kx = 0; kx < g.kw; ++kx) {
          T acc = T(0);
          for (std::int64_t ni = 0; ni < g.n; ++ni) {
            const T* xp = x + (ni * g.c + ci) * g.h * g.w;
            const T* dyp = dy + (ni * g.o + oc) * g.oh * g.ow;
            for (std::int64_t oy = 0; oy < g.oh; ++oy) {
              const std::int64_t iy = oy * g.stride[0] - g.padding[0] + ky * g.dilation[0];
              if (iy < 0 || iy >= g.h) continue;
              for (std::int64_t ox = 0; ox < g.ow; ++ox) {
                const std::int64_t ix = ox * g.stride[1] - g.padding[1] + kx * g.dilation[1];
                if (ix < 0 || ix >= g.w) continue;
                acc += xp[iy * g.w + ix] * dyp[oy * g.ow + ox];
              }
            }
          }
          dw[(item * g.kh + ky) * g.kw + kx] = acc;
        }
      }
    }
  });
}

#if KILN_CPU_ONEDNN
// ---------------------------------------------------------------- oneDNN path

using dnnl::memory;
using Tag = memory::format_tag;

// The plans are never destroyed: tensors and plans may outlive static destruction order,
// and the process ends right after anyway. The engine and the per-thread streams are
// onednn.hpp's, shared with pooling.

enum class ConvKind : std::int64_t { forward, forward_bias, backward_input, backward_weight };

// A user tensor's plain layout and the primitive's preferred one, with the reorder between them.
struct Operand {
  int arg = 0;
  memory::desc user, internal;
  std::optional<dnnl::reorder> reorder;  // user → internal for inputs, internal → user for the output
};

// One cached convolution: the primitive and how its operands reach it.
struct ConvPlan {
  dnnl::primitive primitive;
  std::array<Operand, 2> inputs;
  Operand output;
  std::size_t scratchpad_bytes = 0;
};

memory::dims dims_of(const Shape& s) { return memory::dims(s.begin(), s.end()); }

memory::desc weight_desc(const ConvGeometry& g, Tag tag) {
  if (g.groups == 1) return memory::desc({g.o, g.c, g.kh, g.kw}, memory::data_type::f32, tag);
  // Grouped weights are 5-d for oneDNN; [o, c/g, kh, kw] is the same memory as [g, o/g, c/g, kh, kw].
  return memory::desc({g.groups, g.og(), g.cg(), g.kh, g.kw}, memory::data_type::f32, tag);
}

Operand make_operand(int arg, const memory::desc& user, const memory::desc& internal, bool is_output) {
  Operand op{arg, user, internal, std::nullopt};
  if (user != internal) {
    op.reorder = is_output ? dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), internal, onednn_engine(), user))
                           : dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), user, onednn_engine(), internal));
  }
  return op;
}

// Whether the automatic setting lets oneDNN consider Winograd's algorithm for this pass of
// the layer. oneDNN's AVX-512 Winograd kernels (F(4x4, 3x3)) work on blocks of 16 input and
// 16 output channels, padding a layer with fewer, and transform every tile in and out; its
// heuristics take them for a first layer all the same. Measured on an AVX-512 Xeon, batch 64,
// 28x28, against direct (Winograd's time / direct's):
// - forward: 5.1x with 1 input channel, 3.6x with 3, 2.1x with 8, 1.5x with 12, 1.5x for
//   16 -> 16, even for 16 -> 64 and 32 -> 8; 0.84x for 32 -> 32, 0.64x for 32 -> 64;
// - input gradient: the same pattern (1.4x for 16 -> 16, 0.82x for 32 -> 32);
// - weight gradient: 3.6x with 1 input channel, 2.6x with 3, and 0.46-0.86x from 8.
// So the forward pass and the input gradient consider Winograd from 32 channels on both
// sides, and the weight gradient from 8 input channels (per group).
bool winograd_may_pay(const ConvGeometry& g, ConvKind kind) {
  if (kind == ConvKind::backward_weight) return g.cg() >= 8;
  return g.cg() >= 32 && g.og() >= 32;
}

std::shared_ptr<const ConvPlan> build_plan(const ConvGeometry& g, ConvKind kind, std::span<const PostOp> post_ops,
                                           ConvAlgorithm choice) {
  const auto f32 = memory::data_type::f32;
  const memory::desc x_user(dims_of(g.x_shape()), f32, Tag::nchw), y_user(dims_of(g.y_shape()), f32, Tag::nchw);
  const memory::desc w_user = weight_desc(g, g.groups == 1 ? Tag::oihw : Tag::goihw);
  // format_tag::any lets oneDNN pick its blocked layouts (nChw8c on AVX2) and direct JIT
  // kernels. Measured on a 64x32x28x28, 3x3 layer, forward + both gradients: plain nchw
  // makes oneDNN fall back to GEMM-based kernels that take 1.2-1.6x as long as the
  // blocked kernels plus the reorders in and out.
  const memory::desc x_any(dims_of(g.x_shape()), f32, Tag::any), y_any(dims_of(g.y_shape()), f32, Tag::any);
  const memory::desc w_any = weight_desc(g, Tag::any);
  const memory::desc bias_user({g.o}, f32, Tag::x);
  const memory::dims strides{g.stride[0], g.stride[1]};
  const memory::dims dilates{g.dilation[0] - 1, g.dilation[1] - 1};  // oneDNN counts the gaps
  // PyTorch's symmetric padding; oneDNN accepts the right padding as long as it yields the same output extent.
  const memory::dims padding{g.padding[0], g.padding[1]};

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // scratch memory comes from Kiln's caching allocator
  if (!post_ops.empty()) attr.set_post_ops(to_dnnl(post_ops, {}));  // a forward pass's epilogue (eltwise steps)
  // Auto: oneDNN's Winograd kernels where its heuristics expect them to win (set_conv_algorithm),
  // for the layers where Kiln lets them (winograd_may_pay).
  const auto algorithm = choice == ConvAlgorithm::automatic && winograd_may_pay(g, kind)
                             ? dnnl::algorithm::convolution_auto
                             : dnnl::algorithm::convolution_direct;
  const bool bias = kind == ConvKind::forward_bias;
  const auto forward_desc =
      bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, x_any, w_any, bias_user,
                                             y_any, strides, dilates, padding, padding)
           : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, x_any, w_any, y_any,
                                             strides, dilates, padding, padding);
  const dnnl::convolution_forward::primitive_desc forward(forward_desc, attr, onednn_engine());

  auto plan = std::make_shared<ConvPlan>();
  switch (kind) {
    case ConvKind::forward:
    case ConvKind::forward_bias:
      plan->primitive = dnnl::convolution_forward(forward);
      plan->inputs = {make_operand(DNNL_ARG_SRC, x_user, forward.src_desc(), false),
                      make_operand(DNNL_ARG_WEIGHTS, w_user, forward.weights_desc(), false)};
      plan->output = make_operand(DNNL_ARG_DST, y_user, forward.dst_desc(), true);
      plan->scratchpad_bytes = forward.scratchpad_desc().get_size();
      break;
    case ConvKind::backward_input: {
      const dnnl::convolution_backward_data::primitive_desc pd(
          dnnl::convolution_backward_data::desc(algorithm, x_any, w_any, y_any, strides, dilates, padding, padding),
          attr, onednn_engine(), forward);
      plan->primitive = dnnl::convolution_backward_data(pd);
      plan->inputs = {make_operand(DNNL_ARG_DIFF_DST, y_user, pd.diff_dst_desc(), false),
                      make_operand(DNNL_ARG_WEIGHTS, w_user, pd.weights_desc(), false)};
      plan->output = make_operand(DNNL_ARG_DIFF_SRC, x_user, pd.diff_src_desc(), true);
      plan->scratchpad_bytes = pd.scratchpad_desc().get_size();
      break;
    }
    case ConvKind::backward_weight: {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          dnnl::convolution_backward_weights::desc(algorithm, x_any, w_any, y_any, strides, dilates, padding, padding),
          attr, onednn_engine(), forward);
      plan->primitive = dnnl::convolution_backward_weights(pd);
      plan->inputs = {make_operand(DNNL_ARG_SRC, x_user, pd.src_desc(), false),
                      make_operand(DNNL_ARG_DIFF_DST, y_user, pd.diff_dst_desc(), false)};
      plan->output = make_operand(DNNL_ARG_DIFF_WEIGHTS, w_user, pd.diff_weights_desc(), true);
      plan->scratchpad_bytes = pd.scratchpad_desc().get_size();
      break;
    }
  }
  return plan;
}

// Creating a primitive costs far more than running a small one, so plans are kept for
// the life of the process, keyed by geometry, kind, epilogue and algorithm.
std::shared_ptr<const ConvPlan> plan_for(std::string_view op, const ConvGeometry& g, ConvKind kind,
                                         std::span<const PostOp> post_ops = {}) {
  using Key = std::vector<std::int64_t>;
  Key key{g.n,          g.c,           g.h,           g.w,          g.o,
          g.kh,         g.kw,          g.oh,          g.ow,         g.groups,
          g.stride[0],  g.stride[1],   g.padding[0],  g.padding[1], g.dilation[0],
          g.dilation[1], static_cast<std::int64_t>(kind)};
  append_key(post_ops, {}, key);
  const ConvAlgorithm algorithm = conv_algorithm();
  key.push_back(static_cast<std::int64_t>(algorithm));
  key.push_back(prepare_team());  // oneDNN fixes a convolution's thread count when it creates it
  static std::mutex mutex;
  static auto& plans = *new std::map<Key, std::shared_ptr<const ConvPlan>>();
  {
    std::lock_guard lock(mutex);
    if (auto it = plans.find(key); it != plans.end()) return it->second;
  }
  std::shared_ptr<const ConvPlan> plan;
  try {
    plan = build_plan(g, kind, post_ops, algorithm);
  } catch (const dnnl::error& e) {
    KILN_FAIL("{}: oneDNN could not create a convolution for input {} and weight {}: {}", op, g.x_shape(),
              g.w_shape(), e.what());
  }
  std::lock_guard lock(mutex);
  return plans.emplace(key, std::move(plan)).first->second;
}

// A scratch buffer of `bytes` from the caching allocator (no page faults once warm).
CpuTensor scratch(std::size_t bytes) { return empty(Shape{static_cast<std::int64_t>(bytes)}, DType::u8); }

// Runs a plan on contiguous f32 inputs, writing the contiguous f32 `out`.
void execute(std::string_view op, const ConvPlan& plan, const std::array<CpuTensor, 2>& inputs,
             const std::optional<CpuTensor>& bias, const CpuTensor& out) {
  dnnl::stream& s = onednn_stream();
  std::unordered_map<int, memory> args;
  std::vector<CpuTensor> keep;  // temporaries live until the stream is done
  try {
    for (std::size_t i = 0; i < 2; ++i) {
      const Operand& operand = plan.inputs[i];
      memory user(operand.user, onednn_engine(), inputs[i].bytes());
      if (!operand.reorder) {
        args.emplace(operand.arg, user);
        continue;
      }
      keep.push_back(scratch(operand.internal.get_size()));
      memory internal(operand.internal, onednn_engine(), keep.back().bytes());
      operand.reorder->execute(s, user, internal);
      args.emplace(operand.arg, internal);
    }
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(memory::desc({bias->numel()}, memory::data_type::f32, Tag::x),
                                                  onednn_engine(), bias->bytes()));
    memory user_out(plan.output.user, onednn_engine(), out.bytes());
    memory internal_out = user_out;
    if (plan.output.reorder) {
      keep.push_back(scratch(plan.output.internal.get_size()));
      internal_out = memory(plan.output.internal, onednn_engine(), keep.back().bytes());
    }
    args.emplace(plan.output.arg, internal_out);
    if (plan.scratchpad_bytes > 0) {
      keep.push_back(scratch(plan.scratchpad_bytes));
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   memory(memory::desc({static_cast<memory::dim>(plan.scratchpad_bytes)}, memory::data_type::u8,
                                       Tag::x),
                          onednn_engine(), keep.back().bytes()));
    }
    plan.primitive.execute(s, args);
    if (plan.output.reorder) plan.output.reorder->execute(s, internal_out, user_out);
    s.wait();
  } catch (const dnnl::error& e) {
    KILN_FAIL("{}: oneDNN failed: {}", op, e.what());
  }
}

// Shared by the three entry points: both operands float, of one dtype.
#else
// ---------------------------------------------------------------- columns (embedded build)
// The embedded build has no oneDNN. Its forward convolution runs directly (below) or, for
// strided columns and narrow outputs, as GEMMs: per sample and group, the input's windows as
// columns [C/G·KH·KW, OH·OW] (im2col), multiplied by the group's weights [O/G, C/G·KH·KW].
// The backward passes keep the reference loops.
inline void gemm(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
                 const float* pa, const float* pb, float* pc, std::int64_t ldc) {
  gemm_f32(a, b, m, n, k, pa, pb, pc, ldc);
}
inline void gemm(const GemmLayout& a, const GemmLayout& b, std::int64_t m, std::int64_t n, std::int64_t k,
                 const double* pa, const double* pb, double* pc, std::int64_t ldc) {
  gemm_f64(a, b, m, n, k, pa, pb, pc, ldc);
}

// ---- direct convolution (embedded build)
// Convolutions whose output rows are at least half a vector wide and whose columns advance
// by one input column (stride 1 along W) run directly, without im2col's copy (the kernel
// taps times the input) or GEMM's packing: for a small network those two cost more than
// the arithmetic. Each group's input is copied once into zero-padded planes; then, for
// blocks of output channels, each output row is computed in tiles of one vector, the tile
// of every channel of the block held in registers and the bias fused in. The input vector
// of a tap is loaded once and multiplied by the block's weights (one broadcast each).

template <class T> using PacketOf = typename Eigen::internal::packet_traits<T>::type;
template <class T> constexpr std::int64_t packet_lanes = Eigen::internal::packet_traits<T>::size;

// The channels a block of accumulators covers: 8 vectors and the input's one fit the 16
// registers of AVX2 and SSE.
constexpr std::int64_t kDirectBlock = 8;

bool use_direct(const ConvGeometry& g, std::int64_t lanes) {
  return g.stride[1] == 1 && g.padding[0] >= 0 && g.padding[1] >= 0 && 2 * g.ow >= lanes;
}

// The group's input planes [cg, h, w] copied into zero-padded planes [cg, hp, wp], followed by
// one vector of zeros: a tile may read past the end of the last row.
template <class T>
const T* padded_planes(const ConvGeometry& g, const T* x, std::int64_t hp, std::int64_t wp, std::int64_t lanes) {
  thread_local std::vector<T> buffer;
  const std::int64_t cg = g.cg(), ph = g.padding[0], pw = g.padding[1];
  const auto size = static_cast<std::size_t>(cg * hp * wp + lanes);
  if (buffer.size() < size) buffer.resize(size);
  T* out = buffer.data();
  for (std::int64_t ic = 0; ic < cg; ++ic, x += g.h * g.w) {
    std::fill(out, out + ph * wp, T(0));
    out += ph * wp;
    for (std::int64_t iy = 0; iy < g.h; ++iy, out += wp) {
      std::fill(out, out + pw, T(0));
      std::copy(x + iy * g.w, x + (iy + 1) * g.w, out + pw);
      std::fill(out + pw + g.w, out + wp, T(0));
    }
    const std::int64_t below = (hp - ph - g.h) * wp;
    std::fill(out, out + below, T(0));
    out += below;
  }
  std::fill(out, out + lanes, T(0));
  return buffer.data();
}

// Output channels [oc, oc + Block) of one group: `in` the group's padded planes, `w` and
// `bias` the group's weights and biases, `y` the group's output planes. Width is the
// kernel's width where it is known at compile time (0: read from g). `post`: relu and linear
// steps applied to each tile in registers before it is stored (f32 only; empty otherwise).
template <class T, std::int64_t Block, std::int64_t Width>
void conv_direct_block(const ConvGeometry& g, const T* in, std::int64_t hp, std::int64_t wp, const T* w, const T* bias,
                       T* y, std::int64_t oc, std::span<const PostOp> post) {
  using Packet = PacketOf<T>;
  constexpr std::int64_t lanes = packet_lanes<T>;
  namespace ei = Eigen::internal;
  const std::int64_t cg = g.cg(), kw = Width > 0 ? Width : g.kw, per_channel = cg * g.kh * kw, plane = g.oh * g.ow;
  const std::int64_t sy = g.stride[0], dy = g.dilation[0], dx = g.dilation[1];
  const auto each = [](auto&& fn) {
    [&]<std::size_t... b>(std::index_sequence<b...>) { (fn(std::integral_constant<std::int64_t, b>{}), ...); }(
        std::make_index_sequence<Block>{});
  };
  // The block's weights tap by tap, the block's channels innermost: one pointer reaches the
  // Block weights of a tap.
  thread_local std::vector<T> packed;
  if (packed.size() < static_cast<std::size_t>(per_channel * Block))
    packed.resize(static_cast<std::size_t>(per_channel * Block));
  for (std::int64_t t = 0; t < per_channel; ++t)
    each([&](auto b) { packed[static_cast<std::size_t>(t * Block + b)] = w[(oc + b) * per_channel + t]; });

  const auto tap = [&](Packet(&acc)[Block], const T* row, const T* wk, std::int64_t kx) {
    const Packet v = ei::ploadu<Packet>(row + kx * dx);
    each([&](auto b) { acc[b] = ei::pmadd(v, ei::pset1<Packet>(wk[kx * Block + b]), acc[b]); });
  };
  for (std::int64_t oy = 0; oy < g.oh; ++oy) {
    for (std::int64_t ox = 0; ox < g.ow; ox += lanes) {
      Packet acc[Block];
      each([&](auto b) { acc[b] = ei::pset1<Packet>(bias ? bias[oc + b] : T(0)); });
      const T* wk = packed.data();
      for (std::int64_t ic = 0; ic < cg; ++ic) {
        const T* row = in + (ic * hp + oy * sy) * wp + ox;
        for (std::int64_t ky = 0; ky < g.kh; ++ky, row += dy * wp, wk += kw * Block) {
          if constexpr (Width > 0) {
            [&]<std::size_t... kx>(std::index_sequence<kx...>) { (tap(acc, row, wk, kx), ...); }(
                std::make_index_sequence<Width>{});
          } else {
            for (std::int64_t kx = 0; kx < kw; ++kx) tap(acc, row, wk, kx);
          }
        }
      }
      for (const PostOp& op : post) {
        if (op.alg == PostAlg::relu) {
          each([&](auto b) { acc[b] = ei::pmax(acc[b], ei::pset1<Packet>(T(0))); });
        } else {
          const Packet alpha = ei::pset1<Packet>(static_cast<T>(op.alpha)), beta = ei::pset1<Packet>(static_cast<T>(op.beta));
          each([&](auto b) { acc[b] = ei::pmadd(acc[b], alpha, beta); });
        }
      }
      // A row's last tile may be partial. Its whole vector is stored where the lanes past the
      // row land in the rest of the same plane (rows this loop writes later); only a plane's
      // last row goes lane by lane.
      const std::int64_t at = oy * g.ow + ox, count = std::min(lanes, g.ow - ox);
      const bool whole = count == lanes || at + lanes <= plane;
      each([&](auto b) {
        T* dst = y + (oc + b) * plane + at;
        if (whole) {
          ei::pstoreu(dst, acc[b]);
        } else {
          alignas(64) T tile[lanes];
          ei::pstore(tile, acc[b]);
          std::copy(tile, tile + count, dst);
        }
      });
    }
  }
}

// The group's output channels in blocks of kDirectBlock, then 4, 2 and 1.
template <class T, std::int64_t Width>
void conv_direct_channels(const ConvGeometry& g, const T* in, std::int64_t hp, std::int64_t wp, const T* w,
                          const T* bias, T* y, std::span<const PostOp> post) {
  const std::int64_t og = g.og();
  std::int64_t oc = 0;
  for (; oc + kDirectBlock <= og; oc += kDirectBlock)
    conv_direct_block<T, kDirectBlock, Width>(g, in, hp, wp, w, bias, y, oc, post);
  if (og - oc >= 4) conv_direct_block<T, 4, Width>(g, in, hp, wp, w, bias, y, oc, post), oc += 4;
  if (og - oc >= 2) conv_direct_block<T, 2, Width>(g, in, hp, wp, w, bias, y, oc, post), oc += 2;
  if (og - oc >= 1) conv_direct_block<T, 1, Width>(g, in, hp, wp, w, bias, y, oc, post);
}

template <class T>
void conv_forward_direct(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y,
                         std::span<const PostOp> post) {
  const std::int64_t cg = g.cg(), og = g.og(), per_channel = cg * g.kh * g.kw, plane = g.oh * g.ow;
  const std::int64_t hp = g.h + 2 * g.padding[0], wp = g.w + 2 * g.padding[1];
  for (std::int64_t ni = 0; ni < g.n; ++ni) {
    for (std::int64_t group = 0; group < g.groups; ++group) {
      const T* in = padded_planes(g, x + (ni * g.c + group * cg) * g.h * g.w, hp, wp, packet_lanes<T>);
      const T* wg = w + group * og * per_channel;
      const T* bg = bias ? bias + group * og : nullptr;
      T* yg = y + (ni * g.o + group * og) * plane;
      // The common kernel widths unrolled.
      switch (g.kw) {
        case 1: conv_direct_channels<T, 1>(g, in, hp, wp, wg, bg, yg, post); break;
        case 3: conv_direct_channels<T, 3>(g, in, hp, wp, wg, bg, yg, post); break;
        case 5: conv_direct_channels<T, 5>(g, in, hp, wp, wg, bg, yg, post); break;
        default: conv_direct_channels<T, 0>(g, in, hp, wp, wg, bg, yg, post); break;
      }
    }
  }
}

template <class T> void conv_forward_columns(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  const std::int64_t cg = g.cg(), og = g.og(), k = cg * g.kh * g.kw, p = g.oh * g.ow;
  // The columns' buffer stays with the thread: a small network runs a convolution in
  // microseconds, and a fresh zeroed buffer per call costs a good part of that.
  thread_local std::vector<T> cols;
  if (cols.size() < static_cast<std::size_t>(k * p)) cols.resize(static_cast<std::size_t>(k * p));
  for (std::int64_t ni = 0; ni < g.n; ++ni) {
    for (std::int64_t group = 0; group < g.groups; ++group) {
      T* col = cols.data();
      for (std::int64_t ic = 0; ic < cg; ++ic) {
        const T* xp = x + ((ni * g.c + group * cg + ic) * g.h) * g.w;
        for (std::int64_t ky = 0; ky < g.kh; ++ky)
          for (std::int64_t kx = 0; kx < g.kw; ++kx) {
            // The output columns whose tap lands inside the row: [lo, hi); zeros around them.
            const std::int64_t shift = kx * g.dilation[1] - g.padding[1], sx = g.stride[1];
            const std::int64_t lo = std::clamp<std::int64_t>(shift >= 0 ? 0 : (-shift + sx - 1) / sx, 0, g.ow);
            const std::int64_t hi = std::clamp<std::int64_t>(g.w - shift > 0 ? (g.w - shift + sx - 1) / sx : 0, lo, g.ow);
            for (std::int64_t oy = 0; oy < g.oh; ++oy, col += g.ow) {
              const std::int64_t iy = oy * g.stride[0] - g.padding[0] + ky * g.dilation[0];
              if (iy < 0 || iy >= g.h) {
                std::fill(col, col + g.ow, T(0));
                continue;
              }
              std::fill(col, col + lo, T(0));
              const T* row = xp + iy * g.w + shift;
              if (sx == 1) std::copy(row + lo, row + hi, col + lo);
              else
                for (std::int64_t ox = lo; ox < hi; ++ox) col[ox] = row[ox * sx];
              std::fill(col + hi, col + g.ow, T(0));
            }
          }
      }
      T* yp = y + (ni * g.o + group * og) * p;
      gemm(GemmLayout{false, k}, GemmLayout{false, p}, og, p, k, w + group * og * k, cols.data(), yp, p);
      if (bias)
        for (std::int64_t oc = 0; oc < og; ++oc)
          for (std::int64_t i = 0; i < p; ++i) yp[oc * p + i] += bias[group * og + oc];
    }
  }
}
#endif

void check_float(std::string_view op, DType a, DType b, const Shape& sa, const Shape& sb) {
  KILN_CHECK(a == b, "{}: dtypes differ: {} {} and {} {}", op, sa, a, sb, b);
  KILN_CHECK(is_float(a), "{}: expected float tensors, got {} {}", op, sa, a);
}

// conv2d's checks of its operands, and its geometry.
ConvGeometry checked_conv2d(const CpuTensor& x, const CpuTensor& weight, const std::optional<CpuTensor>& bias,
                            const ops::Conv2dOptions& options) {
  check_float("conv2d", x.dtype, weight.dtype, x.shape, weight.shape);
  const ConvGeometry g = conv_geometry("conv2d", x.shape, weight.shape, options);
  if (bias) {
    KILN_CHECK(bias->shape == Shape{g.o}, "conv2d: bias must have shape [{}] for weight {}, got {}", g.o,
               weight.shape, bias->shape);
    KILN_CHECK(bias->dtype == x.dtype, "conv2d: bias dtype {} differs from input dtype {}", bias->dtype, x.dtype);
  }
  return g;
}

#if !KILN_CPU_ONEDNN
// The embedded build's forward convolution into `out`: direct where the stride along W is 1,
// as im2col and GEMM otherwise; `post` (f32, relu and linear steps) applied to the output.
void conv_forward_embedded(const ConvGeometry& g, const CpuTensor& x, const CpuTensor& weight,
                           const std::optional<CpuTensor>& bias, std::span<const PostOp> post, CpuTensor& out) {
  const ContiguousInput xc(x), wc(weight);
  std::optional<ContiguousInput> bc;
  if (bias) bc.emplace(*bias);
  dispatch_float("conv2d", x.dtype, [&]<class T>() {
    const T *xp = xc->data<T>(), *wp = wc->data<T>(), *bp = bc ? (*bc)->data<T>() : nullptr;
    // f32 directly; f64 through the columns only (its direct kernels would add 30 KB to a
    // static program).
    if constexpr (std::is_same_v<T, float>) {
      if (use_direct(g, packet_lanes<T>)) {
        conv_forward_direct<T>(g, xp, wp, bp, out.data<T>(), post);
        return;
      }
    }
    conv_forward_columns<T>(g, xp, wp, bp, out.data<T>());
    if constexpr (std::is_same_v<T, float>)
      if (!post.empty()) apply_post_ops(post, out.data<float>(), out.numel(), 0, {}, {});
  });
}
#endif

// oneDNN needs at least one element in every operand; empty problems take the reference path.
bool use_onednn(const ConvGeometry& g, DType dtype) {
  return dtype == DType::f32 && g.n > 0 && g.c > 0 && g.o > 0;
}

}  // namespace

void set_conv_algorithm(ConvAlgorithm algorithm) {
  KILN_CHECK(algorithm == ConvAlgorithm::automatic || algorithm == ConvAlgorithm::direct,
             "set_conv_algorithm: {} is no ConvAlgorithm", static_cast<int>(algorithm));
  conv_algorithm_setting().store(algorithm);
}
ConvAlgorithm conv_algorithm() { return conv_algorithm_setting().load(); }

}  // namespace kiln::cpu

namespace kiln {

using cpu::CpuTensor;

Cpu::Primitive Cpu::conv2d(const Primitive& x, const Primitive& weight, const std::optional<Primitive>& bias,
                           const ops::Conv2dOptions& options) {
  const cpu::ConvGeometry g = cpu::checked_conv2d(x, weight, bias, options);
  if (!cpu::is_native_float(x.dtype)) {
    std::optional<Primitive> b32;
    if (bias) b32 = cast(*bias, DType::f32);
    return cast(conv2d(cast(x, DType::f32), cast(weight, DType::f32), b32, options), x.dtype);
  }
  CpuTensor out = cpu::empty(g.y_shape(), x.dtype);
  if (out.numel() == 0) return out;
#if KILN_CPU_ONEDNN
  const CpuTensor xc = cpu::contiguous(x), wc = cpu::contiguous(weight);
  std::optional<CpuTensor> bc;
  if (bias) bc = cpu::contiguous(*bias);
  if (cpu::use_onednn(g, x.dtype)) {
    const auto plan = cpu::plan_for("conv2d", g, bias ? cpu::ConvKind::forward_bias : cpu::ConvKind::forward);
    cpu::execute("conv2d", *plan, {xc, wc}, bc, out);
    return out;
  }
  cpu::dispatch_float("conv2d", x.dtype, [&]<class T>() {
    cpu::conv_forward_ref<T>(g, xc.data<T>(), wc.data<T>(), bc ? bc->data<T>() : nullptr, out.data<T>());
  });
#else
  cpu::conv_forward_embedded(g, x, weight, bias, {}, out);
#endif
  return out;
}

std::vector<Cpu::Primitive> Cpu::conv2d_program(const Primitive& x, const Primitive& weight,
                                                const std::optional<Primitive>& bias, const ops::Conv2dOptions& options,
                                                const codegen::Program& program, std::span<const Primitive> inputs,
                                                std::span<const double> params) {
  const cpu::ConvGeometry g = cpu::checked_conv2d(x, weight, bias, options);
  KILN_CHECK(program.inputs().size() == inputs.size() + 1 && static_cast<int>(params.size()) == program.param_count(),
             "conv2d_program: the program reads {} inputs and {} parameters, given the output and {} inputs and {} "
             "parameters", program.inputs().size(), program.param_count(), inputs.size(), params.size());
  // Eltwise steps only (no inputs beside the output): oneDNN's convolution writes its own
  // blocked layout, in which a binary step's tensor would need a reorder first.
  if (!inputs.empty() || x.dtype != DType::f32 || g.y_shape().numel() == 0) return {};
  const auto post_ops = cpu::post_op_chain(program, params);
  if (!post_ops) return {};
#if !KILN_CPU_ONEDNN
  // The embedded build applies relu and linear steps to each tile before it is stored.
  if (!cpu::applies(*post_ops)) return {};
  CpuTensor out = cpu::empty(g.y_shape(), x.dtype);
  cpu::conv_forward_embedded(g, x, weight, bias, *post_ops, out);
  return {out};
#else
  if (!cpu::use_onednn(g, x.dtype)) return {};
  CpuTensor out = cpu::empty(g.y_shape(), x.dtype);
  const CpuTensor xc = cpu::contiguous(x), wc = cpu::contiguous(weight);
  std::optional<CpuTensor> bc;
  if (bias) bc = cpu::contiguous(*bias);
  const auto plan =
      cpu::plan_for("conv2d_program", g, bias ? cpu::ConvKind::forward_bias : cpu::ConvKind::forward, *post_ops);
  cpu::execute("conv2d_program", *plan, {xc, wc}, bc, out);
  return {out};
#endif
}

Cpu::Primitive Cpu::conv2d_backward_input(const Primitive& dy, const Primitive& weight, const Shape& x_shape,
                                          const ops::Conv2dOptions& options) {
  cpu::check_float("conv2d_backward_input", dy.dtype, weight.dtype, dy.shape, weight.shape);
  const cpu::ConvGeometry g = cpu::conv_geometry("conv2d_backward_input", x_shape, weight.shape, options);
  KILN_CHECK(dy.shape == g.y_shape(),
             "conv2d_backward_input: the output gradient has shape {}, but input {} and weight {} give output {}",
             dy.shape, x_shape, weight.shape, g.y_shape());
  if (!cpu::is_native_float(dy.dtype))
    return cast(conv2d_backward_input(cast(dy, DType::f32), cast(weight, DType::f32), x_shape, options), dy.dtype);
  CpuTensor out = cpu::empty(x_shape, dy.dtype);
  if (out.numel() == 0) return out;
  const CpuTensor dyc = cpu::contiguous(dy), wc = cpu::contiguous(weight);
#if KILN_CPU_ONEDNN
  if (cpu::use_onednn(g, dy.dtype)) {
    const auto plan = cpu::plan_for("conv2d_backward_input", g, cpu::ConvKind::backward_input);
    cpu::execute("conv2d_backward_input", *plan, {dyc, wc}, std::nullopt, out);
    return out;
  }
#endif
  cpu::dispatch_float("conv2d_backward_input", dy.dtype, [&]<class T>() {
    cpu::conv_backward_input_ref<T>(g, dyc.data<T>(), wc.data<T>(), out.data<T>());
  });
  return out;
}

Cpu::Primitive Cpu::conv2d_backward_weight(const Primitive& x, const Primitive& dy, const Shape& weight_shape,
                                           const ops::Conv2dOptions& options) {
  cpu::check_float("conv2d_backward_weight", x.dtype, dy.dtype, x.shape, dy.shape);
  const cpu::ConvGeometry g = cpu::conv_geometry("conv2d_backward_weight", x.shape, weight_shape, options);
  KILN_CHECK(dy.shape == g.y_shape(),
             "conv2d_backward_weight: the output gradient has shape {}, but input {} and weight {} give output {}",
             dy.shape, x.shape, weight_shape, g.y_shape());
  if (!cpu::is_native_float(x.dtype))
    return cast(conv2d_backward_weight(cast(x, DType::f32), cast(dy, DType::f32), weight_shape, options), x.dtype);
  CpuTensor out = cpu::empty(weight_shape, x.dtype);
  if (out.numel() == 0) return out;
  const CpuTensor xc = cpu::contiguous(x), dyc = cpu::contiguous(dy);
#if KILN_CPU_ONEDNN
  if (cpu::use_onednn(g, x.dtype)) {
    const auto plan = cpu::plan_for("conv2d_backward_weight", g, cpu::ConvKind::backward_weight);
    cpu::execute("conv2d_backward_weight", *plan, {xc, dyc}, std::nullopt, out);
    return out;
  }
#endif
  cpu::dispatch_float("conv2d_backward_weight", x.dtype, [&]<class T>() {
    cpu::conv_backward_weight_ref<T>(g, xc.data<T>(), dyc.data<T>(), out.data<T>());
  });
  return out;
}

}  // namespace kiln
