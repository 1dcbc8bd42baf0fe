#include "core/conv/conv.h"

#include <algorithm>
#include <cstring>

#include "core/conv/depthwise_kernels.h"
#include "core/error.h"

namespace ortquant::conv {

using gemm::Epilogue;
using gemm::Kernel;
using gemm::PackedCols;
using gemm::PackedWeights;
using gemm::Parallel;

void validate_attrs(const ConvAttrs& a, bool transposed) {
  if (a.kh < 1 || a.kw < 1) throw_error("kernel_shape must be positive, got [", a.kh, ", ", a.kw, "]");
  if (a.sh < 1 || a.sw < 1) throw_error("strides must be positive, got [", a.sh, ", ", a.sw, "]");
  if (a.dh < 1 || a.dw < 1) throw_error("dilations must be positive, got [", a.dh, ", ", a.dw, "]");
  if (a.pt < 0 || a.pl < 0 || a.pb < 0 || a.pr < 0)
    throw_error("pads must not be negative, got [", a.pt, ", ", a.pl, ", ", a.pb, ", ", a.pr, "]");
  if (a.group < 1) throw_error("group must be positive, got ", a.group);
  if (transposed) {
    if (a.oph < 0 || a.opw < 0 || a.oph >= std::max(a.sh, a.dh) || a.opw >= std::max(a.sw, a.dw))
      throw_error("output_padding [", a.oph, ", ", a.opw, "] must be non-negative and smaller than max(stride, dilation)");
  } else if (a.oph != 0 || a.opw != 0) {
    throw_error("output_padding is only defined for transposed convolutions");
  }
}

int64_t conv_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, const char* what) {
  const int64_t span = d * (k - 1) + 1;
  const int64_t padded = in + p0 + p1;
  if (padded < span)
    throw_error("input ", what, " ", in, " (padded ", padded, ") is smaller than the dilated kernel ", span);
  return (padded - span) / s + 1;
}

int64_t conv_transpose_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, int64_t op,
                               const char* what) {
  const int64_t out = (in - 1) * s + d * (k - 1) + 1 + op - p0 - p1;
  if (in < 1 || out < 1) throw_error("output ", what, " would be ", out, " (input ", in, ", pads ", p0, "+", p1, ")");
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

void depthwise(const DepthwiseArgs& d, int64_t p0, int64_t p1, int32_t* acc, Kernel kernel) {
  switch (gemm::resolve_kernel(kernel)) {
    case Kernel::kAvx512Vnni: avx512::depthwise_planes(d, p0, p1, acc); break;
    case Kernel::kAvxVnni:
    case Kernel::kAvx2: avx2::depthwise_planes(d, p0, p1, acc); break;
    default: scalar::depthwise_planes(d, p0, p1, acc); break;
  }
}

void valid_columns(const ConvAttrs& a, int64_t w, int64_t ow, std::vector<int64_t>* lo, std::vector<int64_t>* hi) {
  lo->assign(static_cast<size_t>(a.kw), 0);
  hi->assign(static_cast<size_t>(a.kw), 0);
  for (int64_t j = 0; j < a.kw; ++j) {
    const int64_t off = j * a.dw - a.pl;
    int64_t l = off >= 0 ? 0 : (-off + a.sw - 1) / a.sw;
    int64_t e = (w - 1 - off) >= 0 ? (w - 1 - off) / a.sw + 1 : 0;
    l = std::min(l, ow);
    e = std::min(e, ow);
    (*lo)[static_cast<size_t>(j)] = l;
    (*hi)[static_cast<size_t>(j)] = std::max(l, e);
  }
}

// ---- Conv2d ----------------------------------------------------------------------------------------------

Conv2d::Conv2d(const int8_t* w, int64_t m, int64_t cg, const ConvAttrs& a) : a_(a), m_(m), cg_(cg) {
  validate_attrs(a, false);
  if (m < 1 || cg < 1) throw_error("weights must have at least one output and one input channel");
  if (m % a.group != 0)
    throw_error("weights have ", m, " output channels, not a multiple of group ", a.group);
  depthwise_ = cg == 1;
  const int64_t khw = a.kh * a.kw;
  if (depthwise_) {
    w_.assign(w, w + m * khw);
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

void Conv2d::run(const int8_t* x, const Shape& xs, const Epilogue& ep, void* out, const Parallel& par,
                 Kernel kernel) const {
  const Shape os = output_shape(xs);
  const int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3], oh = os[2], ow = os[3];
  const int64_t p = oh * ow;
  if (n == 0 || p == 0) return;
  const int64_t es = static_cast<int64_t>(gemm::out_elem_size(ep.kind));
  std::vector<int64_t> lo, hi;
  valid_columns(a_, w, ow, &lo, &hi);
  if (depthwise_) {
    DepthwiseArgs d{x, w_.data(), c, h, w, m_, oh, ow, a_, &ep, out, lo.data(), hi.data()};
    const int64_t planes = n * m_;
    const size_t tasks = tasks_for(planes, p * a_.kh * a_.kw);
    const Kernel kk = gemm::resolve_kernel(kernel);
    std::vector<int32_t> acc(tasks * static_cast<size_t>(ow));  // per task (tasks must not throw)
    par(tasks, [&](size_t t) {
      conv::depthwise(d, planes * static_cast<int64_t>(t) / static_cast<int64_t>(tasks),
                      planes * static_cast<int64_t>(t + 1) / static_cast<int64_t>(tasks),
                      acc.data() + t * static_cast<size_t>(ow), kk);
    });
    return;
  }
  const int64_t mg = m_ / a_.group;
  const int64_t k = cg_ * a_.kh * a_.kw;
  const int64_t kg = gemm::kgroups_of(k);
  const bool direct = a_.kh == 1 && a_.kw == 1 && a_.sh == 1 && a_.sw == 1 && a_.pt == 0 && a_.pl == 0 &&
                      a_.pb == 0 && a_.pr == 0;
  PackedCols cols;
  gemm::prepare_cols(&cols, p, k);
  const size_t pack_tasks = tasks_for(kg, 4 * p);
  // im2col rows of each packing task (allocated here: tasks must not throw).
  std::vector<int8_t> scratch_all(direct ? 0 : pack_tasks * static_cast<size_t>(4 * p));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < a_.group; ++g) {
      const int8_t* xg = x + (b * c + g * cg_) * h * w;
      par(pack_tasks, [&](size_t t) {
        const int64_t g0 = kg * static_cast<int64_t>(t) / static_cast<int64_t>(pack_tasks);
        const int64_t g1 = kg * static_cast<int64_t>(t + 1) / static_cast<int64_t>(pack_tasks);
        if (direct) {
          gemm::pack_cols(&cols, xg, h * w, g0, g1);
          return;
        }
        int8_t* scratch = scratch_all.data() + t * static_cast<size_t>(4 * p);
        for (int64_t gg = g0; gg < g1; ++gg) {
          const int8_t* rows[4];
          for (int r = 0; r < 4; ++r) {
            const int64_t kk = 4 * gg + r;
            if (kk >= k) {
              rows[r] = nullptr;
              continue;
            }
            // k = (channel, i, j): one im2col row, the input pixels this tap reads for every output pixel.
            const int64_t ch = kk / (a_.kh * a_.kw), i = (kk / a_.kw) % a_.kh, j = kk % a_.kw;
            const int8_t* plane = xg + ch * h * w;
            int8_t* dst = scratch + r * p;
            const int64_t off = j * a_.dw - a_.pl;
            const int64_t l = lo[static_cast<size_t>(j)], e = hi[static_cast<size_t>(j)];
            for (int64_t y = 0; y < oh; ++y) {
              int8_t* d = dst + y * ow;
              const int64_t ih = y * a_.sh - a_.pt + i * a_.dh;
              if (ih < 0 || ih >= h) {
                std::memset(d, 0, static_cast<size_t>(ow));
                continue;
              }
              const int8_t* row = plane + ih * w;
              std::memset(d, 0, static_cast<size_t>(l));
              if (a_.sw == 1) {
                std::memcpy(d + l, row + l + off, static_cast<size_t>(e - l));
              } else {
                for (int64_t o = l; o < e; ++o) d[o] = row[o * a_.sw + off];
              }
              std::memset(d + e, 0, static_cast<size_t>(ow - e));
            }
            rows[r] = dst;
          }
          gemm::pack_cols_group(&cols, gg, rows);
        }
      });
      Epilogue eg = ep;
      if (ep.bias) eg.bias = ep.bias + g * mg;
      char* og = static_cast<char*>(out) + (b * m_ + g * mg) * p * es;
      gemm::gemm_cols(packed_[static_cast<size_t>(g)], cols, eg, og, p, par, kernel);
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
  PackedCols cols;
  gemm::prepare_cols(&cols, pin, cg);
  std::vector<int32_t> sums(static_cast<size_t>(mg_ * khw * pin));  // [(oc, i, j)][input pixel]
  Epilogue raw;
  raw.kind = gemm::OutKind::kRaw;
  const int64_t kg = gemm::kgroups_of(cg);
  const size_t pack_tasks = tasks_for(kg, 4 * pin);
  const size_t out_tasks = tasks_for(mg_, khw * pin);
  std::vector<int64_t> acc_all(out_tasks * static_cast<size_t>(pout));  // per task (tasks must not throw)
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < a_.group; ++g) {
      const int8_t* xg = x + (b * c_ + g * cg) * pin;
      par(pack_tasks, [&](size_t t) {
        gemm::pack_cols(&cols, xg, pin, kg * static_cast<int64_t>(t) / static_cast<int64_t>(pack_tasks),
                        kg * static_cast<int64_t>(t + 1) / static_cast<int64_t>(pack_tasks));
      });
      gemm::gemm_cols(packed_[static_cast<size_t>(g)], cols, raw, sums.data(), pin, par, kernel);
      // col2im: every (oc, i, j, input pixel) adds into output pixel (ih*s - p + i*d, iw*s - p + j*d).
      par(out_tasks, [&](size_t t) {
        int64_t* acc = acc_all.data() + t * static_cast<size_t>(pout);
        const int64_t o0 = mg_ * static_cast<int64_t>(t) / static_cast<int64_t>(out_tasks);
        const int64_t o1 = mg_ * static_cast<int64_t>(t + 1) / static_cast<int64_t>(out_tasks);
        for (int64_t oc = o0; oc < o1; ++oc) {
          std::fill(acc, acc + pout, 0);
          for (int64_t i = 0; i < a_.kh; ++i) {
            for (int64_t j = 0; j < a_.kw; ++j) {
              const int32_t* s = sums.data() + ((oc * a_.kh + i) * a_.kw + j) * pin;
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
