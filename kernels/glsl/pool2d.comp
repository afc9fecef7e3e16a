// 2-d pooling, NCHW (backends/vulkan/src/pool.cpp), with the CPU backend's semantics: NaN
// wins a max window, ties keep the first tap in (kh, kw) order, a window of only -inf keeps
// its first valid position; count_include_pad and PyTorch's divisors; adaptive windows
// [floor(i * H / OH), ceil((i + 1) * H / OH)).
//
// Forward kernels run one invocation per output element. Backward kernels run one invocation
// per input element and loop over the outputs whose windows contain it, adding their
// gradients in the CPU's order (deterministic, no atomics).
//
// Knobs: T, the element type (float, double); one of KIND_MAX_FORWARD, KIND_MAX_BACKWARD,
// KIND_AVG_FORWARD, KIND_AVG_BACKWARD, KIND_ADAPTIVE_FORWARD, KIND_ADAPTIVE_BACKWARD.
// Bindings: 0 params, 1 out, 2 the source (x forward, dy backward), 3 for max pooling the
// indices: written forward as i64 (low, high) pairs of ints, so no shaderInt64 is needed;
// read backward as ints checked on the host.
// Parameters (ints): [0] invocations, [1] H, [2] W, [3] OH, [4] OW, [5..7) kernel,
// [7..9) stride, [9..11) padding, [11..13) dilation, [13] count_include_pad, [14] the
// source's element offset.
#version 450
#include "kiln.glsl"

layout(local_size_x = WORKGROUP_SIZE) in;
layout(std430, binding = 1) writeonly buffer Out { T out_data[]; };
layout(std430, binding = 2) readonly buffer In { T in_data[]; };
#if defined(KIND_MAX_FORWARD)
layout(std430, binding = 3) writeonly buffer Index { int index_data[]; };
#elif defined(KIND_MAX_BACKWARD)
layout(std430, binding = 3) readonly buffer Index { int index_data[]; };
#endif

#if defined(KIND_MAX_FORWARD) || defined(KIND_AVG_FORWARD) || defined(KIND_ADAPTIVE_FORWARD)
#define FORWARD 1
#else
#define FORWARD 0
#endif

// PyTorch's average-pooling divisor factor along one axis (0: no input element in the window).
int extent(int o, int n, int k, int s, int p) {
  const int start = o * s - p;
  const int end = min(start + k, n + p);
  const int lo = max(start, 0), hi = min(end, n);
  return hi <= lo ? 0 : params[13] != 0 ? end - start : hi - lo;
}

void main() {
  const int i = invocation_index();
  if (i >= params[0]) return;
  const int H = params[1], W = params[2], OH = params[3], OW = params[4];
  const int KH = params[5], KW = params[6], SH = params[7], SW = params[8];
  const int PH = params[9], PW = params[10], DH = params[11], DW = params[12], SRC = params[14];
#if FORWARD
  const int ow = i % OW, oh = (i / OW) % OH, p = i / (OW * OH);
  const int base = SRC + p * H * W;
#else
  const int iw = i % W, ih = (i / W) % H, p = i / (W * H);
  const int base = SRC + p * OH * OW;
#endif

#if defined(KIND_MAX_FORWARD)
  T best = T(uintBitsToFloat(0xff800000u));  // -inf
  int index = -1;
  const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
  for (int kh = 0; kh < KH; ++kh) {
    const int ih = ih0 + kh * DH;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      const int iw = iw0 + kw * DW;
      if (iw < 0 || iw >= W) continue;
      const T v = in_data[base + ih * W + iw];
      if (v > best || isnan(v)) {
        best = v;
        index = ih * W + iw;
      }
    }
  }
  if (index < 0) {
    int a = ih0, b = iw0;
    while (a < 0) a += DH;
    while (b < 0) b += DW;
    index = min(a, H - 1) * W + min(b, W - 1);
  }
  out_data[i] = best;
  index_data[2 * i] = index;
  index_data[2 * i + 1] = 0;

#elif defined(KIND_MAX_BACKWARD)
  // Outputs whose span [o * s - p, o * s - p + dilation * (k - 1)] covers the element, in
  // the CPU's (oh, ow) order, adding those whose stored index is this element.
  const int span_h = DH * (KH - 1) + 1, span_w = DW * (KW - 1) + 1;
  const int nh = ih + PH - span_h + 1, nw = iw + PW - span_w + 1;
  const int oh0 = nh <= 0 ? 0 : (nh + SH - 1) / SH, oh1 = min(OH - 1, (ih + PH) / SH);
  const int ow0 = nw <= 0 ? 0 : (nw + SW - 1) / SW, ow1 = min(OW - 1, (iw + PW) / SW);
  const int target = ih * W + iw, plane = p * OH * OW;
  T acc = T(0);
  for (int oh = oh0; oh <= oh1; ++oh)
    for (int ow = ow0; ow <= ow1; ++ow) {
      const int o = oh * OW + ow;
      if (index_data[plane + o] == target) acc += in_data[base + o];
    }
  out_data[i] = acc;

#elif defined(KIND_AVG_FORWARD)
  T sum = T(0);
  const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
  for (int kh = 0; kh < KH; ++kh) {
    const int ih = ih0 + kh;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      const int iw = iw0 + kw;
      if (iw < 0 || iw >= W) continue;
      sum += in_data[base + ih * W + iw];
    }
  }
  const int divisor = extent(oh, H, KH, SH, PH) * extent(ow, W, KW, SW, PW);
  out_data[i] = divisor == 0 ? T(0) : sum / T(divisor);

#elif defined(KIND_AVG_BACKWARD)
  // Every output whose window covers the element, dy / divisor. The CPU adds, per output
  // row, the taps in kw order: for one element that is ow descending.
  const int nh = ih + PH - KH + 1, nw = iw + PW - KW + 1;
  const int oh0 = nh <= 0 ? 0 : (nh + SH - 1) / SH, oh1 = min(OH - 1, (ih + PH) / SH);
  const int ow0 = nw <= 0 ? 0 : (nw + SW - 1) / SW, ow1 = min(OW - 1, (iw + PW) / SW);
  T acc = T(0);
  for (int oh = oh0; oh <= oh1; ++oh) {
    const int rows = extent(oh, H, KH, SH, PH);
    for (int ow = ow1; ow >= ow0; --ow) {
      const int divisor = rows * extent(ow, W, KW, SW, PW);
      acc += divisor == 0 ? T(0) : in_data[base + oh * OW + ow] / T(divisor);
    }
  }
  out_data[i] = acc;

#elif defined(KIND_ADAPTIVE_FORWARD)
  const int h0 = (oh * H) / OH, h1 = 1 + ((oh + 1) * H - 1) / OH;
  const int w0 = (ow * W) / OW, w1 = 1 + ((ow + 1) * W - 1) / OW;
  T sum = T(0);
  for (int ih = h0; ih < h1; ++ih)
    for (int iw = w0; iw < w1; ++iw) sum += in_data[base + ih * W + iw];
  out_data[i] = sum / T((h1 - h0) * (w1 - w0));

#elif defined(KIND_ADAPTIVE_BACKWARD)
  // The outputs [floor(i * OH / H), floor(((i + 1) * OH - 1) / H)] read the element.
  const int oh0 = (ih * OH) / H, oh1 = ((ih + 1) * OH - 1) / H;
  const int ow0 = (iw * OW) / W, ow1 = ((iw + 1) * OW - 1) / W;
  T acc = T(0);
  for (int oh = oh0; oh <= oh1; ++oh) {
    const int rows = 1 + ((oh + 1) * H - 1) / OH - (oh * H) / OH;
    for (int ow = ow0; ow <= ow1; ++ow) {
      const int cols = 1 + ((ow + 1) * W - 1) / OW - (ow * W) / OW;
      acc += in_data[base + oh * OW + ow] / T(rows * cols);
    }
  }
  out_data[i] = acc;

#else
#error "pool2d.comp: define one of the KIND_ knobs"
#endif
}
