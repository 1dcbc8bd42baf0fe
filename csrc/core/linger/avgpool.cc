#include "core/linger/avgpool.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/requant.h"

namespace ortquant::linger {

int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t pad_end, bool ceil_mode) {
  if (in < 0) throw_error("negative input size ", in);
  check_range("kernel_shape", k, 1, kMaxGeometry);
  check_range("strides", s, 1, kMaxGeometry);
  check_range("pads", pad_begin, 0, kMaxGeometry);
  check_range("pads", pad_end, 0, kMaxGeometry);
  const int64_t padded = checked_add(checked_add(in, pad_begin, "padded input"), pad_end, "padded input");
  const int64_t span = padded - k;
  if (span < 0) throw_error("kernel ", k, " is larger than the padded input ", padded);
  int64_t out = (ceil_mode ? ceil_div(span, s, "pooling output size") : floor_div(span, s, "pooling output size")) + 1;
  // The last window must start inside the input or the left padding (torch).
  if (ceil_mode && (out - 1) * s >= in + pad_begin) --out;
  if (out <= 0) throw_error("pooling output size ", out, " is not positive");
  return out;
}

void Pool2dParams::validate() const {
  check_range("kernel_shape", kh, 1, kMaxGeometry, "height");
  check_range("kernel_shape", kw, 1, kMaxGeometry, "width");
  check_range("strides", sh, 1, kMaxGeometry, "height");
  check_range("strides", sw, 1, kMaxGeometry, "width");
  const int64_t pads[4] = {pt, pl, pb, pr};
  for (int i = 0; i < 4; ++i) {
    check_range("pads", pads[i], 0, kMaxGeometry);
    if (2 * pads[i] > (i % 2 == 0 ? kh : kw))
      throw_error("pad ", pads[i], " must be at most half the kernel size ", i % 2 == 0 ? kh : kw);
  }
}

Shape avgpool2d_shape(const Shape& in, const Pool2dParams& p) {
  if (in.size() != 4) throw_error("input must be 4-D NCHW, got shape ", shape_str(in));
  p.validate();
  return {in[0], in[1], pool_out_size(in[2], p.kh, p.sh, p.pt, p.pb, p.ceil_mode),
          pool_out_size(in[3], p.kw, p.sw, p.pl, p.pr, p.ceil_mode)};
}

void avgpool2d(const int8_t* x, const Shape& in, const Pool2dParams& p, int8_t* y, int64_t plane_begin,
               int64_t plane_end) {
  const Shape out = avgpool2d_shape(in, p);
  const int64_t H = in[2], W = in[3], OH = out[2], OW = out[3];
  const double K = static_cast<double>(p.kh * p.kw);
  for (int64_t pl = plane_begin; pl < plane_end; ++pl) {
    const int8_t* xp = x + pl * H * W;
    int8_t* yp = y + pl * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      int64_t h0 = oh * p.sh - p.pt;
      int64_t h1 = std::min(h0 + p.kh, H + p.pb);
      const int64_t dh = h1 - h0;
      h0 = std::max<int64_t>(h0, 0);
      h1 = std::min(h1, H);
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t w0 = ow * p.sw - p.pl;
        int64_t w1 = std::min(w0 + p.kw, W + p.pr);
        const int64_t d = dh * (w1 - w0);
        w0 = std::max<int64_t>(w0, 0);
        w1 = std::min(w1, W);
        int64_t S = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) S += xp[h * W + w];
        const double avg = static_cast<double>(S) / static_cast<double>(d);
        const double r = std::nearbyint(avg * K);
        const int64_t q = luna::floor_to_int64(r / K + 0.5);
        yp[oh * OW + ow] = static_cast<int8_t>(luna::saturate(q, p.bits));
      }
    }
  }
}

}  // namespace ortquant::linger
