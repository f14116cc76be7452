// Rotate-half RoPE, numerically as HF computes it: the angle is the float32
// product float(pos) * inv_freq[i] (torch's inv_freq @ positions in fp32),
// then float32 cos and sin of that angle. Angles are computed once per token
// and shared by all heads. A zero frequency gives cos 1, sin 0: exact
// pass-through, which is how partial rotary dimensions are expressed.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/kernels.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

G4_CPU_BEGIN

void Rope(float* x, int64_t ldx, int64_t tokens, int heads, int head_dim, const int32_t* positions,
          const float* inv_freq) {
  const int half = head_dim / 2;
  const int64_t row = static_cast<int64_t>(heads) * head_dim;
  ParallelFor(tokens, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, row)),
              [&](int64_t t0, int64_t t1) {
                std::vector<float> cs(2 * static_cast<size_t>(half));
                float* cos_t = cs.data();
                float* sin_t = cs.data() + half;
                for (int64_t t = t0; t < t1; ++t) {
                  const float pos = static_cast<float>(positions[t]);
                  for (int i = 0; i < half; ++i) {
                    const float angle = pos * inv_freq[i];  // one float32 rounding, as torch
                    cos_t[i] = std::cos(angle);
                    sin_t[i] = std::sin(angle);
                  }
                  for (int h = 0; h < heads; ++h) {
                    float* x1 = x + t * ldx + static_cast<int64_t>(h) * head_dim;
                    float* x2 = x1 + half;
                    int i = 0;
                    for (; i < half; i += kLanes) {
                      const int n = half - i < kLanes ? half - i : kLanes;
                      const VF a = VLoadN(x1 + i, n), b = VLoadN(x2 + i, n);
                      const VF c = VLoadN(cos_t + i, n), s = VLoadN(sin_t + i, n);
                      VStoreN(x1 + i, VSub(VMul(a, c), VMul(b, s)), n);
                      VStoreN(x2 + i, VAdd(VMul(b, c), VMul(a, s)), n);
                    }
                  }
                }
              });
}

G4_CPU_END
