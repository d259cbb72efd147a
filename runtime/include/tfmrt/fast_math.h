// Scalar float exp and log written so the compiler vectorises the loops that call them (no libm
// call, no branch): the fast CPU kernels' softmax-style loops and the ensemble mixture of
// tfmdata's search use them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tfmrt::fastmath {

// exp(x): Cephes' expf (range reduction to [-ln2/2, ln2/2] with ln2 split in two, degree-6
// polynomial, 2^n through the exponent bits); relative error < 2e-7. Inputs below -87.3 give
// ~1e-38 instead of denormals or 0 (callers only need absolute accuracy); exp(0) is exactly 1.
inline float expApprox(float x) {
  x = std::min(88.3762626647949f, std::max(-87.3365478515625f, x));
  // Round-to-nearest through the 1.5 * 2^23 trick: no libm call, so the loop vectorises.
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float g = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * g + 1.3981999507e-3f;
  p = p * g + 8.3334519073e-3f;
  p = p * g + 4.1665795894e-2f;
  p = p * g + 1.6666665459e-1f;
  p = p * g + 5.0000001201e-1f;
  p = p * g * g + g + 1.0f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// log(x) for a positive normal x: x = 2^e a with a in [sqrt(1/2), sqrt(2)), log a = 2 atanh(z) =
// 2 (z + z^3/3 + ... + z^9/9), z = (a - 1) / (a + 1), |z| <= 0.1716 (the next term is below 2e-9
// relative); log(1) is exactly 0.
inline float logApprox(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  int32_t e = int32_t(bits >> 23) - 127;
  const uint32_t mantissa = (bits & 0x007FFFFFu) | 0x3F800000u;  // [1, 2)
  float a;
  std::memcpy(&a, &mantissa, sizeof a);
  const bool high = a > 1.41421356f;
  a = high ? a * 0.5f : a;
  e = high ? e + 1 : e;
  const float z = (a - 1.0f) / (a + 1.0f), z2 = z * z;
  float p = 1.0f / 9.0f;
  p = p * z2 + 1.0f / 7.0f;
  p = p * z2 + 1.0f / 5.0f;
  p = p * z2 + 1.0f / 3.0f;
  p = p * z2 + 1.0f;
  return float(e) * 0.693147180559945309f + 2.0f * z * p;
}

}  // namespace tfmrt::fastmath
