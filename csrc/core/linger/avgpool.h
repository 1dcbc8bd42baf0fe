// linger AvgPool2dInt (thinker domain), spec: linger.md section 2. int8 NCHW in and out, output scale = input
// scale. linger's double-precision sequence per window, with torch's count_include_pad=True divisor:
//   S  = sum of the window (zero padding counted), d = window size clipped to the padded input (torch), K = kh*kw
//   y  = saturate(floor(rint(S / d * K) / K + 0.5), data_bits)      (rint: round half to even, like torch.round)
// For ordinary windows d = K and this is floor(S / K + 1/2); a ceil_mode window hanging past the padded border
// divides by its clipped size first (what torch and linger do).
#pragma once
#include <cstdint>

#include "core/shape.h"

namespace ortquant::linger {

struct Pool2dParams {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right
  bool ceil_mode = false;
  int bits = 8;  // saturation range of the result
  // Throws Error naming the attribute for kernel/stride outside [1, kMaxGeometry], negative pads or pads larger
  // than half the kernel (torch's rule). Called before any size is computed from the attributes (kernel
  // creation and shape inference).
  void validate() const;
};

// Output size of one spatial axis (torch's pooling_output_shape); throws Error when it is not positive or the
// arguments are out of range (never divides by zero, never overflows).
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t pad_begin, int64_t pad_end, bool ceil_mode);
Shape avgpool2d_shape(const Shape& in, const Pool2dParams& p);
// Planes [plane_begin, plane_end) of the N*C planes.
void avgpool2d(const int8_t* x, const Shape& in, const Pool2dParams& p, int8_t* y, int64_t plane_begin,
               int64_t plane_end);

}  // namespace ortquant::linger
