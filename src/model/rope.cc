#include "model/rope.h"

#include <cmath>

namespace g4 {

StatusOr<std::vector<float>> RopeInverseFrequencies(const RopeParams& params, int head_dim) {
  if (head_dim <= 0 || head_dim % 2)
    return InvalidArgument("[rope] head_dim " + std::to_string(head_dim) + " must be positive and even");
  const int half = head_dim / 2;
  int rotated = half;
  if (params.type == RopeParams::Type::kProportional) {
    rotated = static_cast<int>(std::floor(params.partial_rotary_factor * head_dim / 2));
  } else if (params.partial_rotary_factor != 1.0) {
    return Unsupported("[rope] partial_rotary_factor with rope_type default");
  }
  std::vector<float> inv(half, 0.0f);
  const float base = static_cast<float>(params.theta);
  for (int i = 0; i < rotated; ++i) {
    // torch: base ** (arange(0, dim, 2).float() / dim), then 1.0 / that, in fp32.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / std::pow(base, exponent);
    inv[i] = static_cast<float>(inv[i] / params.factor);
  }
  return inv;
}

}  // namespace g4
