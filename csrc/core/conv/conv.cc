#include "core/conv/conv.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif


#include "core/conv/depthwise_kernels.h"
#include "core/conv/dwnhwc.h"
#include "core/error.h"
#include "core/scratch.h"

namespace ortquant::conv {

using gemm::Epilogue;
using gemm::Kernel;
using gemm::PackedWeights;
using gemm::Parallel;

void validate_attrs(const ConvAttrs& a, bool transposed) {
  // Limits (docs/ops.md): strides in [1, 64] in both dimensions (the phase-plane engine keeps per-phase tables of
  // 64 entries and allocates stride_h * stride_w planes), kernel, dilations and pads at most kMaxGeometry. With
  // them every size below fits int64 with room to spare, and the byte limit bounds every buffer.
  check_range("kernel_shape", a.kh, 1, kMaxGeometry, "height");
  check_range("kernel_shape", a.kw, 1, kMaxGeometry, "width");
  check_range("strides", a.sh, 1, kMaxConvStride, "height");
  check_range("strides", a.sw, 1, kMaxConvStride, "width");
  check_range("dilations", a.dh, 1, kMaxGeometry, "height");
  check_range("dilations", a.dw, 1, kMaxGeometry, "width");
  check_range("pads", a.pt, 0, kMaxGeometry, "top");
  check_range("pads", a.pl, 0, kMaxGeometry, "left");
  check_range("pads", a.pb, 0, kMaxGeometry, "bottom");
  check_range("pads", a.pr, 0, kMaxGeometry, "right");
  check_range("group", a.group, 1, INT32_MAX);
  if (transposed) {
    if (a.oph < 0 || a.opw < 0 || a.oph >= std::max(a.sh, a.dh) || a.opw >= std::max(a.sw, a.dw))
      throw_error("output_padding [", a.oph, ", ", a.opw, "] must be non-negative and smaller than max(stride, dilation)");
  } else if (a.oph != 0 || a.opw != 0) {
    throw_error("output_padding is only defined for transposed convolutions");
  }
}

int64_t conv_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, const char* what) {
  if (in < 0) throw_error("input ", what, " ", in, " is negative");
  if (s < 1 || d < 1 || k < 1) throw_error("kernel, stride and dilation must be positive");
  const int64_t span = checked_add(checked_mul(d, k - 1, "dilated kernel"), 1, "dilated kernel");
  const int64_t padded = checked_add(checked_add(in, p0, "padded input"), p1, "padded input");
  if (padded < span)
    throw_error("input ", what, " ", in, " (padded ", padded, ") is smaller than the dilated kernel ", span);
  return (padded - span) / s + 1;
}

int64_t conv_transpose_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, int64_t op,
                               const char* what) {
  if (in < 1) throw_error("input ", what, " ", in, " must be positive");
  const char* c = "transposed convolution output size";
  int64_t out = checked_mul(in - 1, s, c);
  out = checked_add(out, checked_mul(d, k - 1, c), c);
  out = checked_sub(checked_sub(checked_add(out, 1 + op, c), p0, c), p1, c);
  if (out < 1) throw_error("output ", what, " would be ", out, " (input ", in, ", pads ", p0, "+", p1, ")");
  return out;
}

namespace {

void check_input(const Shape& x, int64_t channels, const char* what_channels) {
  if (x.size() != 4) throw_error("input X must be 4-D [N, C, H, W], got shape ", shape_str(x));
  if (x[1] != channels)
    throw_error("input X has ", x[1], " channels but the weights expect ", channels, " (", what_channels, ")");
}

// Task count for n items of `work` MACs each.
size_t tasks_for(int64_t n, int64_t work_each) {
  const int64_t total = n * std::max<int64_t>(work_each, 1);
  return static_cast<size_t>(std::clamp<int64_t>(total / (int64_t{1} << 20), 1, std::min<int64_t>(n, 64)));
}

}  // namespace

void depthwise(const DepthwiseArgs& d, int64_t p0, int64_t p1, int8_t* phases, int32_t* acc, Kernel kernel) {
  switch (gemm::resolve_kernel(kernel)) {
    case Kernel::kAvx512Vnni: avx512::depthwise_planes(d, p0, p1, phases, acc); break;
    case Kernel::kAvxVnni:
    case Kernel::kAvx2: avx2::depthwise_planes(d, p0, p1, phases, acc); break;
    default: scalar::depthwise_planes(d, p0, p1, phases, acc); break;
  }
}

// ---- phase planes ----------------------------------------------------------------------------------------

PhaseGrid phase_grid(int64_t h, int64_t w, const ConvAttrs& a, int64_t oh, int64_t ow) {
  PhaseGrid g;
  g.sh = a.sh;
  g.sw = a.sw;
  g.rows = (h + a.pt + a.pb + a.sh - 1) / a.sh;
  g.cols = (w + a.pl + a.pr + a.sw - 1) / a.sw;
  g.oh = oh;
  g.ow = ow;
  // A tap run of the last grid row may pass the plane's end by up to (kw-1)*dw/sw bytes (discarded columns).
  g.plane = g.rows * g.cols + (a.kw - 1) * a.dw / a.sw + 1;
  return g;
}

namespace {

// dst[t] = src[2t] for t < n, reading nothing at or beyond `limit`.
void even_bytes(const int8_t* src, int64_t n, const int8_t* limit, int8_t* dst) {
#if defined(__SSE2__)
  if (n >= 16 && src + 2 * n <= limit) {
    const __m128i lo = _mm_set1_epi16(0x00FF);
    auto step = [&](int64_t t) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * t));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * t + 16));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + t), _mm_packus_epi16(_mm_and_si128(a, lo), _mm_and_si128(b, lo)));
    };
    for (int64_t t = 0; t + 16 <= n; t += 16) step(t);
    if (n % 16) step(n - 16);  // the last 16, overlapping
    return;
  }
#endif
  for (int64_t t = 0; t < n; ++t) dst[t] = src[2 * t];
}

}  // namespace

void build_phases(const int8_t* x, int64_t channels, int64_t h, int64_t w, const ConvAttrs& a, const PhaseGrid& g,
                  int8_t* dst) {
  const int64_t sh = g.sh, sw = g.sw, cols = g.cols, rows = g.rows, plane = g.plane;
  // Per column phase q: the columns [first, end) whose input column x*sw + q - pl lies in [0, w).
  int64_t first[64], end[64];
  for (int64_t q = 0; q < sw && q < 64; ++q) {
    // Phase q's column x reads input column x*sw + q - pl: the valid x are ceil((pl - q) / sw) ..
    // floor((w - 1 + pl - q) / sw). Both divisions round toward -infinity/+infinity explicitly: the numerators are
    // negative when sw > w + pl (a narrow input with a large stride), and C++ '/' truncates toward zero, which
    // would admit one column that does not exist (a heap over-read, issue 9).
    first[q] = std::clamp<int64_t>(ceil_div(a.pl - q, sw, "conv phase columns"), 0, cols);
    end[q] = std::max(first[q], std::min(cols, floor_div(w - 1 + a.pl - q, sw, "conv phase columns") + 1));
  }
  for (int64_t c = 0; c < channels; ++c) {
    const int8_t* plane_in = x + c * h * w;
    int8_t* cdst = dst + c * sh * sw * plane;
    for (int64_t y = 0; y < rows * sh; ++y) {
      const int64_t r = y % sh, yy = y / sh, iy = y - a.pt;
      for (int64_t q = 0; q < sw; ++q) {
        int8_t* row = cdst + (r * sw + q) * plane + yy * cols;
        const int64_t f = q < 64 ? first[q] : cols, e = q < 64 ? end[q] : cols;
        if (iy < 0 || iy >= h || f >= e) {
          std::memset(row, 0, static_cast<size_t>(cols));
          continue;
        }
        const int8_t* src = plane_in + iy * w + f * sw + q - a.pl;
        for (int64_t xx = 0; xx < f; ++xx) row[xx] = 0;  // the left padding: a few bytes
        if (sw == 1) {
          std::memcpy(row + f, src, static_cast<size_t>(e - f));
        } else if (sw == 2) {
          even_bytes(src, e - f, plane_in + h * w, row + f);
        } else {
          for (int64_t xx = 0; xx < e - f; ++xx) row[f + xx] = src[xx * sw];
        }
        for (int64_t xx = e; xx < cols; ++xx) row[xx] = 0;
      }
    }
    for (int64_t ph = 0; ph < sh * sw; ++ph)
      std::memset(cdst + ph * plane + rows * cols, 0, static_cast<size_t>(plane - rows * cols));
  }
}

namespace {
// ORTQUANT_CONV_ALGO=planes|nhwc, read when a convolution is prepared (session creation), forces the algorithm of
// the convolutions whose caller asks for kAuto (so one benchmark process can compare the algorithms through
// onnxruntime); unset or anything else: the per-layer rule.
ConvAlgo env_algo() {
  const char* e = std::getenv("ORTQUANT_CONV_ALGO");
  if (e == nullptr) return ConvAlgo::kAuto;
  if (std::strcmp(e, "planes") == 0) return ConvAlgo::kPlanes;
  if (std::strcmp(e, "nhwc") == 0) return ConvAlgo::kNhwc;
  return ConvAlgo::kAuto;
}
}  // namespace

// ---- Conv2d ----------------------------------------------------------------------------------------------

Conv2d::Conv2d(const int8_t* w, int64_t m, int64_t cg, const ConvAttrs& a)
    : a_(a), m_(m), cg_(cg), forced_(env_algo()) {
  validate_attrs(a, false);
  if (m < 1 || cg < 1) throw_error("weights must have at least one output and one input channel");
  if (m % a.group != 0)
    throw_error("weights have ", m, " output channels, not a multiple of group ", a.group);
  depthwise_ = cg == 1;
  const int64_t khw = a.kh * a.kw;
  if (depthwise_) {
    w_.assign(w, w + m * khw);
    if (m == a.group) dwn_ = std::make_shared<const DwNhwcWeights>(pack_dw_nhwc(w, m, a.kh, a.kw));
    return;
  }
  const int64_t mg = m / a.group;
  const int64_t k = cg * khw;
  for (int64_t g = 0; g < a.group; ++g)
    packed_.push_back(gemm::pack_weights(w + g * mg * k, mg, k, k, PackedWeights::Layout::kRowBlocks));
}

Shape Conv2d::output_shape(const Shape& x) const {
  check_input(x, cg_ * a_.group, "group * weight channels");
  const int64_t oh = conv_out_dim(x[2], a_.kh, a_.sh, a_.dh, a_.pt, a_.pb, "height");
  const int64_t ow = conv_out_dim(x[3], a_.kw, a_.sw, a_.dw, a_.pl, a_.pr, "width");
  return {x[0], m_, oh, ow};
}


ConvAlgo Conv2d::algo(Kernel kernel, ConvAlgo algo) const {
  if (!dwn_) return ConvAlgo::kPlanes;
  if (algo == ConvAlgo::kAuto) algo = forced_;
  if (algo != ConvAlgo::kAuto) return algo;
  // Measured on AVX2 (BENCHMARKS.md, issue 11): the channels-last kernel wins on every depthwise layer with at
  // least 8 channels. The AVX-512 plane kernel (16 output columns per zmm) was not measured against it: kept.
  const Kernel k = gemm::resolve_kernel(kernel);
  const bool vec = k == Kernel::kAvx2 || k == Kernel::kAvxVnni;
  return vec && m_ >= 8 ? ConvAlgo::kNhwc : ConvAlgo::kPlanes;
}

void Conv2d::run(const int8_t* x, const Shape& xs, const Epilogue& ep, void* out, const Parallel& par,
                 Kernel kernel, ConvAlgo algo_req) const {
  const Shape os = output_shape(xs);
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = os[2], ow = os[3];
  if (n == 0 || oh * ow == 0) return;
  const int64_t es = static_cast<int64_t>(gemm::out_elem_size(ep.kind));
  if (algo(kernel, algo_req) == ConvAlgo::kNhwc) {
    DwNhwcArgs d{x, c, h, w, a_, oh, ow, h + a_.pt + a_.pb, w + a_.pl + a_.pr, dwn_.get(), nullptr, &ep, out};
    const int64_t scratch = dw_nhwc_scratch(d);
    if (scratch > 0) {
      // Byte offset of every tap in the padded block (the pad tap of an odd count repeats the last, weight 0).
      std::vector<int64_t> off(static_cast<size_t>(2 * dwn_->pairs));
      for (int64_t t = 0; t < 2 * dwn_->pairs; ++t) {
        const int64_t tt = std::min(t, dwn_->taps - 1);
        off[static_cast<size_t>(t)] = ((tt / a_.kw) * a_.dh * d.wp + (tt % a_.kw) * a_.dw) * kDwBlock;
      }
      d.tap_off = off.data();
      d.shift = dw_nhwc_shift(ep, ep.bias, c, dwn_->taps);
      const int64_t units = n * dwn_->blocks;
      const size_t tasks = tasks_for(units, oh * ow * kDwBlock * dwn_->taps * 8);
      int8_t* const buf = thread_scratch_as<int8_t>(ScratchSlot::kDepthwisePhases, tasks * static_cast<size_t>(scratch));
      const Kernel kk = gemm::resolve_kernel(kernel);
      par(tasks, [&](size_t t) {
        dw_nhwc(d, units * static_cast<int64_t>(t) / static_cast<int64_t>(tasks),
                units * static_cast<int64_t>(t + 1) / static_cast<int64_t>(tasks),
                buf + t * static_cast<size_t>(scratch), kk);
      });
      return;
    }
  }
  const PhaseGrid g = phase_grid(h, w, a_, oh, ow);
  if (depthwise_) {
    DepthwiseArgs d{x, w_.data(), c, h, w, m_, a_, g, &ep, out};
    const int64_t planes = n * m_;
    const size_t tasks = tasks_for(planes, g.grid() * a_.kh * a_.kw);
    const Kernel kk = gemm::resolve_kernel(kernel);
    // Scratch per task, allocated here (pool tasks must not throw).
    int8_t* const phases =
        thread_scratch_as<int8_t>(ScratchSlot::kDepthwisePhases, tasks * static_cast<size_t>(g.channel_bytes()));
    int32_t* const acc =
        thread_scratch_as<int32_t>(ScratchSlot::kDepthwiseAcc, tasks * static_cast<size_t>(2 * g.grid()));
    par(tasks, [&](size_t t) {
      conv::depthwise(d, planes * static_cast<int64_t>(t) / static_cast<int64_t>(tasks),
                      planes * static_cast<int64_t>(t + 1) / static_cast<int64_t>(tasks),
                      phases + t * static_cast<size_t>(g.channel_bytes()),
                      acc + t * static_cast<size_t>(2 * g.grid()), kk);
    });
    return;
  }
  const int64_t mg = m_ / a_.group;
  const int64_t k = cg_ * a_.kh * a_.kw;
  // A 1x1 convolution with unit strides and no padding reads the input planes as they are.
  const bool direct = a_.kh == 1 && a_.kw == 1 && a_.sh == 1 && a_.sw == 1 && a_.pt == 0 && a_.pl == 0 &&
                      a_.pb == 0 && a_.pr == 0;
  const int64_t cols = direct ? ow : g.cols;
  const int64_t grid = oh * cols;
  int8_t* const phases =
      direct ? nullptr : thread_scratch_as<int8_t>(ScratchSlot::kConvPhases, static_cast<size_t>(cg_ * g.channel_bytes()));
  const int8_t** const rows = thread_scratch_as<const int8_t*>(ScratchSlot::kConvRows, static_cast<size_t>(k));
  // Outputs computed on the grid's extra columns go to a scratch grid first, then the valid ones are copied out.
  char* const grid_out =
      cols == ow ? nullptr : thread_scratch_as<char>(ScratchSlot::kConvGrid, static_cast<size_t>(mg * grid * es));
  const size_t build_tasks = direct ? 1 : tasks_for(cg_, 64 * g.channel_bytes());
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t gi = 0; gi < a_.group; ++gi) {
      const int8_t* xg = x + (b * c + gi * cg_) * h * w;
      if (direct) {
        for (int64_t kk = 0; kk < k; ++kk) rows[kk] = xg + kk * h * w;
      } else {
        par(build_tasks, [&](size_t t) {
          const int64_t c0 = cg_ * static_cast<int64_t>(t) / static_cast<int64_t>(build_tasks);
          const int64_t c1 = cg_ * static_cast<int64_t>(t + 1) / static_cast<int64_t>(build_tasks);
          build_phases(xg + c0 * h * w, c1 - c0, h, w, a_, g, phases + c0 * g.channel_bytes());
        });
        // k = (channel, i, j): each im2col row is one contiguous run of a phase plane.
        for (int64_t kk = 0; kk < k; ++kk) {
          const int64_t ch = kk / (a_.kh * a_.kw), i = (kk / a_.kw) % a_.kh, j = kk % a_.kw;
          rows[kk] = tap_run(phases, g, a_, ch, i, j);
        }
      }
      Epilogue eg = ep;
      if (ep.bias) eg.bias = ep.bias + gi * mg;
      char* og = static_cast<char*>(out) + (b * m_ + gi * mg) * oh * ow * es;
      char* dst = grid_out == nullptr ? og : grid_out;
      gemm::gemm_cols_source(
          packed_[static_cast<size_t>(gi)], grid,
          [&](int64_t q, uint8_t* scratch) {
            const int64_t p0 = q * gemm::kPanel;
            gemm::pack_panel(rows, k, p0, std::min<int64_t>(gemm::kPanel, grid - p0), scratch);
            return static_cast<const uint8_t*>(scratch);
          },
          eg, dst, grid, par, kernel);
      if (grid_out != nullptr) {
        for (int64_t r = 0; r < mg * oh; ++r)
          std::memcpy(og + r * ow * es, grid_out + r * cols * es, static_cast<size_t>(ow * es));
      }
    }
  }
}

// ---- ConvTranspose2d -------------------------------------------------------------------------------------

ConvTranspose2d::ConvTranspose2d(const int8_t* w, int64_t c, int64_t mg, const ConvAttrs& a)
    : a_(a), c_(c), mg_(mg) {
  validate_attrs(a, true);
  if (c < 1 || mg < 1) throw_error("weights must have at least one input and one output channel");
  if (c % a.group != 0) throw_error("weights have ", c, " input channels, not a multiple of group ", a.group);
  const int64_t cg = c / a.group;
  const int64_t khw = a.kh * a.kw;
  // Rows r = (oc, i, j) of group g, reduction over the group's input channels: W_t[r][ic] = w[ic][oc][i][j].
  for (int64_t g = 0; g < a.group; ++g)
    packed_.push_back(gemm::pack_weights_strided(w + g * cg * mg * khw, mg * khw, cg, 1, mg * khw,
                                                 PackedWeights::Layout::kRowBlocks));
}

Shape ConvTranspose2d::output_shape(const Shape& x) const {
  check_input(x, c_, "weight input channels");
  const int64_t oh = conv_transpose_out_dim(x[2], a_.kh, a_.sh, a_.dh, a_.pt, a_.pb, a_.oph, "height");
  const int64_t ow = conv_transpose_out_dim(x[3], a_.kw, a_.sw, a_.dw, a_.pl, a_.pr, a_.opw, "width");
  return {x[0], mg_ * a_.group, oh, ow};
}

void ConvTranspose2d::run(const int8_t* x, const Shape& xs, const Epilogue& ep, void* out, const Parallel& par,
                          Kernel kernel) const {
  const Shape os = output_shape(xs);
  const int64_t n = xs[0], h = xs[2], w = xs[3], oh = os[2], ow = os[3], m = os[1];
  const int64_t cg = c_ / a_.group;
  const int64_t khw = a_.kh * a_.kw;
  const int64_t pin = h * w, pout = oh * ow;
  if (n == 0) return;
  const int64_t es = static_cast<int64_t>(gemm::out_elem_size(ep.kind));
  const int8_t** const rows = thread_scratch_as<const int8_t*>(ScratchSlot::kConvRows, static_cast<size_t>(cg));
  int32_t* const sums =  // [(oc, i, j)][input pixel]
      thread_scratch_as<int32_t>(ScratchSlot::kConvTransposeSums, static_cast<size_t>(mg_ * khw * pin));
  Epilogue raw;
  raw.kind = gemm::OutKind::kRaw;
  const size_t out_tasks = tasks_for(mg_, khw * pin);
  int64_t* const acc_all = thread_scratch_as<int64_t>(ScratchSlot::kConvTransposeAcc, out_tasks * static_cast<size_t>(pout));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < a_.group; ++g) {
      const int8_t* xg = x + (b * c_ + g * cg) * pin;
      for (int64_t ic = 0; ic < cg; ++ic) rows[ic] = xg + ic * pin;
      gemm::gemm_cols_source(
          packed_[static_cast<size_t>(g)], pin,
          [&](int64_t q, uint8_t* scratch) {
            const int64_t p0 = q * gemm::kPanel;
            gemm::pack_panel(rows, cg, p0, std::min<int64_t>(gemm::kPanel, pin - p0), scratch);
            return static_cast<const uint8_t*>(scratch);
          },
          raw, sums, pin, par, kernel);
      // col2im: every (oc, i, j, input pixel) adds into output pixel (ih*s - p + i*d, iw*s - p + j*d).
      par(out_tasks, [&](size_t t) {
        int64_t* acc = acc_all + t * static_cast<size_t>(pout);
        const int64_t o0 = mg_ * static_cast<int64_t>(t) / static_cast<int64_t>(out_tasks);
        const int64_t o1 = mg_ * static_cast<int64_t>(t + 1) / static_cast<int64_t>(out_tasks);
        for (int64_t oc = o0; oc < o1; ++oc) {
          std::fill(acc, acc + pout, 0);
          for (int64_t i = 0; i < a_.kh; ++i) {
            for (int64_t j = 0; j < a_.kw; ++j) {
              const int32_t* s = sums + ((oc * a_.kh + i) * a_.kw + j) * pin;
              for (int64_t ih = 0; ih < h; ++ih) {
                const int64_t y = ih * a_.sh - a_.pt + i * a_.dh;
                if (y < 0 || y >= oh) continue;
                int64_t* arow = acc + y * ow;
                const int32_t* srow = s + ih * w;
                for (int64_t iw = 0; iw < w; ++iw) {
                  const int64_t xo = iw * a_.sw - a_.pl + j * a_.dw;
                  if (xo >= 0 && xo < ow) arow[xo] += srow[iw];
                }
              }
            }
          }
          const int64_t ch = g * mg_ + oc;
          const int32_t bias = ep.bias ? ep.bias[ch] : 0;
          char* dst = static_cast<char*>(out) + (b * m + ch) * pout * es;
          for (int64_t q = 0; q < pout; ++q) gemm::store_scalar_wide(ep, acc[q], bias, dst, q);
        }
      });
    }
  }
}

}  // namespace ortquant::conv
