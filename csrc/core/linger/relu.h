// Relu for the thinker / onnxinfer domains (decision 14): y = x < 0 ? 0 : x on int8, int32 and float32 (as ONNX
// Relu in onnxruntime: NaN and -0.0 pass through). The scale is unchanged (linger iqRelu).
#pragma once
#include <cstdint>

namespace ortquant::linger {

template <class T>  // int8_t, int32_t, float
void relu(const T* x, T* y, int64_t n);

}  // namespace ortquant::linger
