// Convolutions of the linger ops (Conv2dInt, Conv1dInt as a 1-row Conv2d, ConvTranspose2dInt) on the int8 GEMM
// engine: NCHW, zero padding in the integer domain, exact int32/int64 sums, the GEMM epilogue per output channel.
//   - general groups: implicit im2col straight into the engine's packed pixel panels, then gemm_cols (the
//     output comes out NCHW);
//   - depthwise (one input channel per group): a direct kernel (GEMM with K = kh*kw is a poor fit);
//   - transposed convolution: gemm_cols to exact int32 column sums, then col2im (int64) and the epilogue.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/gemm/gemm.h"
#include "core/shape.h"

namespace ortquant::conv {

struct ConvAttrs {
  int64_t kh = 1, kw = 1;            // kernel
  int64_t sh = 1, sw = 1;            // strides
  int64_t dh = 1, dw = 1;            // dilations
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads: top, left, bottom, right (ONNX order [t, l, b, r])
  int64_t oph = 0, opw = 0;          // output_padding (transposed convolution only)
  int64_t group = 1;
};

// Throws Error for non-positive kernel/stride/dilation/group or negative pads (and bad output_padding when
// `transposed`: it must be < max(stride, dilation), as in torch).
void validate_attrs(const ConvAttrs& a, bool transposed);

// Output size of one spatial dim of a convolution; throws Error when the (padded) input is smaller than the
// dilated kernel. `what` names the dim in the message.
int64_t conv_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, const char* what);
// Output size of one spatial dim of a transposed convolution; throws Error when it is not positive.
int64_t conv_transpose_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1, int64_t op,
                               const char* what);

// Which algorithm a convolution runs (kAuto: the per-layer rule of Conv2d::algo(); the others force one, for tests
// and benchmarks; a forced algorithm that does not apply to the layer falls back to the one that does).
enum class ConvAlgo : int {
  kAuto = -1,
  kPlanes = 0,  // implicit im2col over stride-phase planes (general), per-plane kernel (depthwise)
  kNhwc = 1,    // channels-last depthwise (dwnhwc.h): group == channels == outputs only
};

struct DwNhwcWeights;

// The input positions a channel-quad layer reads (Conv2d::QuadFill): rows r0 + i * rstep (i < rows), columns
// c0 + j * cstep (j < cols).
struct QuadGrid {
  int64_t r0 = 0, rstep = 1, rows = 0;
  int64_t c0 = 0, cstep = 1, cols = 0;
};

// A convolution with its weights prepared (packed per group, or kept for the depthwise kernel).
// Weights [m][c/group][kh][kw]; m must be a multiple of group.
class Conv2d {
 public:
  Conv2d(const int8_t* w, int64_t m, int64_t cg, const ConvAttrs& a);
  // [n, m, oh, ow] for an input [n, c, h, w]; throws Error naming the mismatch (channels vs. group * c/group,
  // input smaller than the kernel).
  Shape output_shape(const Shape& x) const;
  // x [n, c, h, w] -> out [n, m, oh, ow] of ep.kind (ep.bias: m values or null).
  void run(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, void* out, const gemm::Parallel& par,
           gemm::Kernel kernel = gemm::Kernel::kAuto, ConvAlgo algo = ConvAlgo::kAuto) const;
  bool depthwise() const { return depthwise_; }

  // The exact sums of one image b and group g of the GEMM path: [m/group][oh][stride] int32, the first ow values of
  // each row valid (stride >= ow: the stride-phase grid's extra columns). Called on run_raw()'s calling thread.
  using RawSink = FunctionRef<void(int64_t b, int64_t g, const int32_t* sums, int64_t stride)>;
  // run() takes the GEMM path (implicit im2col), not a depthwise kernel: the path run_raw() needs.
  bool gemm_path() const { return !depthwise_; }
  // The GEMM path with ep.kind == kRaw, handing each (image, group) block of sums to `sink` while it is still in
  // cache instead of copying it to an output (integer mode rescales it to float there). Throws Error when
  // !gemm_path() or ep.kind != kRaw.
  // plane_stride (0: xs[2] * xs[3]): the distance between the input's channel planes when they are rows of a larger
  // tensor, e.g. a band of rows of each plane read in place; only a plain_1x1() layer takes one (Error otherwise).
  void run_raw(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, const RawSink& sink,
               const gemm::Parallel& par, gemm::Kernel kernel = gemm::Kernel::kAuto, int64_t plane_stride = 0) const;
  // A 1x1 layer with unit strides and no padding: the GEMM reads the input planes as they are (no im2col copy).
  bool plain_1x1() const { return plain_1x1_; }
  // Writes the int8 codes of the input positions (sel.r0 + i * sel.rstep, sel.c0 + j * sel.cstep), i < sel.rows,
  // j < sel.cols, of the 4 input channels [c, c + 4) of image b, [4][sel.rows][sel.cols], at dst: run_raw_fill's
  // source, so that a caller can quantize each quad of channels straight into the engine's planes (through a buffer
  // that stays in L1) instead of materializing the codes tensor. The whole input (0, 1, h, 0, 1, w) unless the
  // layer's taps all read one row (column) phase of a strided input: a 1x1 stride-2 layer reads a quarter of it.
  using QuadFill = FunctionRef<void(int64_t b, int64_t c, const QuadGrid& sel, int8_t* dst)>;
  // run_raw_fill applies to an input of shape xs: the channel-quad path (quad planes of at most 256 KiB).
  bool quad_fill_ok(const Shape& xs) const;
  // run_raw() with the input's codes taken from `fill` quad by quad, each code written once into the channel-quad
  // planes the kernel reads (padding: the code 0; with strides only the stride phases some tap reads). Same sums
  // as run_raw() on the codes `fill` writes. Throws Error when !quad_fill_ok(xs) or ep.kind != kRaw.
  void run_raw_fill(const QuadFill& fill, const Shape& xs, const gemm::Epilogue& ep, const RawSink& sink,
                    const gemm::Parallel& par, gemm::Kernel kernel = gemm::Kernel::kAuto) const;
  // The sums of output rows [y0, y1) of image b and group g: [m/group][y1 - y0][ow] int32, contiguous. Called on
  // run_raw_bands()'s calling thread.
  using BandSink = FunctionRef<void(int64_t b, int64_t g, int64_t y0, int64_t y1, const int32_t* sums)>;
  // run_raw_bands applies to an input of shape xs: a channel-quad layer with unit strides whose quad planes are
  // larger than the whole-image channel-quad path keeps in L2 (kQuadMaxBytes, conv.cc).
  bool bands_ok(const Shape& xs) const;
  // run_raw() in bands of output rows: per band, only the input rows it reads are interleaved into channel-quad
  // planes (padding: the code 0), its pixel panels are copied from them, and `sink` gets the band's sums while they
  // are in cache (no whole-image int32 grid). Same sums as run_raw(). Throws Error when !bands_ok(xs) or
  // ep.kind != kRaw.
  void run_raw_bands(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, const BandSink& sink,
                     const gemm::Parallel& par, gemm::Kernel kernel = gemm::Kernel::kAuto) const;
  // run_raw_dw applies on kernel path `kernel`: a depthwise layer (group == channels == outputs) that run() computes
  // with the channels-last kernel (algo() == kNhwc).
  // ep (optional): the epilogue run_raw_dw will get; a layer of fewer than 8 channels takes the kernel only where
  // its stride-1 row kernel applies, which depends on ep's activation promise (algo()).
  bool dw_raw_ok(const Shape& xs, gemm::Kernel kernel = gemm::Kernel::kAuto, const gemm::Epilogue* ep = nullptr) const;
  // The channels-last depthwise kernel with ep.kind == kRaw, in bands of output rows (dwnhwc.h): `sink` gets the sums
  // of output rows [y0, y1) of each channel c of image b ([y1 - y0][ow] int32; BandSink with g = c) while they are
  // in cache, on the pool's threads (it must not throw and must be safe to call concurrently for distinct (b, c,
  // y0)). Same sums as run(). Throws Error when !dw_raw_ok(xs, kernel) or ep.kind != kRaw.
  // pad_code (-128 .. 127): the code the padding holds. The kernel pads with 0 and the sums of the outputs at the
  // border get pad_code times the weights of their padding taps (add_pad_sums) before the sink sees them.
  void run_raw_dw(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, const BandSink& sink,
                  const gemm::Parallel& par, gemm::Kernel kernel = gemm::Kernel::kAuto, int32_t pad_code = 0) const;
  // A depthwise layer (one input channel per output channel): adds pad_code * (the weights of output channel j whose
  // taps read padding) to its sums `sums`, [y1 - y0][ow] int32 of output rows [y0, y1) of an h x w input, where the
  // engine padded with the code 0. Only the outputs at the border change (those interior in both directions are
  // skipped). Exact: the result is the sums of an input padded with pad_code.
  void add_pad_sums(int32_t* sums, int64_t j, int64_t y0, int64_t y1, int64_t h, int64_t w, int32_t pad_code) const;
  // The algorithm run() uses for `algo` (kAuto: the measured per-layer rule, docs/ops.md) on kernel path `kernel`.
  // xs, ep (optional): the input shape and epilogue of the run; without them a depthwise layer of fewer than 8
  // channels gets the plane kernel.
  ConvAlgo algo(gemm::Kernel kernel, ConvAlgo algo = ConvAlgo::kAuto, const Shape* xs = nullptr,
                const gemm::Epilogue* ep = nullptr) const;

 private:
  // add_pad_sums' per-call part: the output columns [cl, cr) that read no padding column, and per output channel
  // the corrections of the others ([m][cl + ow - cr]) in rows whose kernel rows all read the input.
  struct PadEdges {
    int64_t ow = 0, cl = 0, cr = 0;
    std::vector<int32_t> edge;
  };
  PadEdges pad_edges(int64_t h, int64_t w, int32_t pad_code) const;
  void add_pad_rows(const PadEdges& e, int32_t* sums, int64_t j, int64_t y0, int64_t y1, int64_t h, int64_t w,
                    int32_t pad_code) const;
  void run_gemm(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, void* out, const RawSink* sink,
                const gemm::Parallel& par, gemm::Kernel kernel, const QuadFill* fill = nullptr,
                int64_t plane_stride = 0) const;
  // The channels-last depthwise kernel's stride-1 row kernel (dw_rows_s1) applies to a run on xs with ep.
  bool row_kernel(const Shape& xs, const gemm::Epilogue& ep, gemm::Kernel kernel) const;
  // The channels-last depthwise kernel (algo() == kNhwc); false when its scratch size would overflow.
  bool run_dw_nhwc(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, void* out, const BandSink* sink,
                   const gemm::Parallel& par, gemm::Kernel kernel) const;
  ConvAttrs a_;
  int64_t m_, cg_;
  bool depthwise_;
  bool plain_1x1_ = false;
  std::vector<gemm::PackedWeights> packed_;  // per group (general path)
  // General path with a multiple of 4 channels per group (and not a plain 1x1): the reduction runs in the order
  // (tap, channel) and the input's phase planes are interleaved by channel quads once per image, so that every
  // k-group of a pixel panel is a straight copy of 4-byte pixels (conv.cc, pack_panel_quads) instead of a
  // transpose of four planes repeated for every tap.
  // Measured on Zen 3: it pays while an image's quad planes stay in L2 (at most kQuadMaxBytes, conv.cc); larger
  // images (ESPCN's 64 channels at 128 x 128: 1 MiB) were 11-13 % slower and take the transposing packer over
  // packed_, so the weights are kept in both orders (packed_quad_: (tap, channel)).
  bool quad_ = false;
  // A plain 1x1 layer's run of np pixels takes the channel-quad planes (run_gemm's direct path) on this kernel.
  bool quads_1x1(gemm::Kernel kernel, int64_t np) const;
  std::vector<gemm::PackedWeights> packed_quad_;
  std::vector<int8_t> w_;                    // raw weights (depthwise path)
  std::shared_ptr<const DwNhwcWeights> dwn_;  // channels-last depthwise weights (group == channels == outputs)
  ConvAlgo forced_;                           // ORTQUANT_CONV_ALGO at preparation (conv.cc), kAuto when unset
};

// Transposed convolution with prepared weights [c][m/group][kh][kw] (c input channels, a multiple of group).
class ConvTranspose2d {
 public:
  ConvTranspose2d(const int8_t* w, int64_t c, int64_t mg, const ConvAttrs& a);
  Shape output_shape(const Shape& x) const;
  void run(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, void* out, const gemm::Parallel& par,
           gemm::Kernel kernel = gemm::Kernel::kAuto) const;

 private:
  template <typename Acc>
  void run_acc(const int8_t* x, const Shape& xs, const gemm::Epilogue& ep, void* out, const gemm::Parallel& par,
               gemm::Kernel kernel) const;

  ConvAttrs a_;
  int64_t c_, mg_;
  bool acc32_ = false;  // every output's sum fits int32 (cg * kh * kw * 128 * 128 < 2^31): col2im in int32
  std::vector<gemm::PackedWeights> packed_;  // per group: rows (oc, i, j), k = input channel of the group
};

// The input of a convolution zero-padded and split by stride phase, so that every kernel tap reads one
// contiguous run (implicit im2col without copies per tap): outputs are computed on a grid of oh rows x `cols`
// columns (cols >= ow; the columns ow .. cols-1 are computed and discarded), and tap (i, j) of channel c at grid
// position t reads plane(c, (i*dh) % sh, (j*dw) % sw)[(i*dh / sh) * cols + (j*dw) / sw + t].
struct PhaseGrid {
  int64_t sh = 1, sw = 1;
  int64_t rows = 0, cols = 0;  // one phase plane: rows x cols bytes, followed by zero slack
  int64_t plane = 0;           // bytes per phase plane including the slack
  int64_t oh = 0, ow = 0;
  int64_t grid() const { return oh * cols; }
  int64_t channel_bytes() const { return sh * sw * plane; }
};
PhaseGrid phase_grid(int64_t h, int64_t w, const ConvAttrs& a, int64_t oh, int64_t ow);
// Writes the phase planes of `channels` consecutive input planes [h][w] to dst (channels * channel_bytes()).
void build_phases(const int8_t* x, int64_t channels, int64_t h, int64_t w, const ConvAttrs& a, const PhaseGrid& g,
                  int8_t* dst);
inline const int8_t* tap_run(const int8_t* phases, const PhaseGrid& g, const ConvAttrs& a, int64_t c, int64_t i,
                             int64_t j) {
  const int64_t ri = i * a.dh, rj = j * a.dw;
  return phases + ((c * g.sh + ri % g.sh) * g.sw + rj % g.sw) * g.plane + (ri / g.sh) * g.cols + rj / g.sw;
}

// Depthwise kernels per ISA (depthwise_<isa>.cc): output planes [p0, p1) of n*m.
struct DepthwiseArgs {
  const int8_t* x;  // [n][c][h][w]
  const int8_t* w;  // [m][kh][kw]
  int64_t c, h, w_in, m;
  ConvAttrs a;
  PhaseGrid g;
  const gemm::Epilogue* ep;
  void* out;  // [n][m][oh][ow]
};
// phases: g.channel_bytes() bytes of scratch, acc: 2 * g.grid() int32 of scratch.
void depthwise(const DepthwiseArgs& d, int64_t p0, int64_t p1, int8_t* phases, int32_t* acc, gemm::Kernel kernel);

}  // namespace ortquant::conv
