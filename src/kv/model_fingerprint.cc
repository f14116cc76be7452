#include "kv/model_fingerprint.h"

#include <cstdio>

#include "kv/checksum.h"

namespace g4 {

std::string ModelFingerprint(const Gemma4Config& c, const Gemma4Weights& weights) {
  Fnv1a64 h;
  auto add_int = [&](int64_t v) { h.Add(&v, sizeof v); };
  add_int(c.num_hidden_layers);
  add_int(c.hidden_size);
  add_int(c.vocab_size);
  add_int(c.sliding_window);
  for (const LayerGeometry& g : c.layers) {
    add_int(static_cast<int>(g.type));
    add_int(g.head_dim);
    add_int(g.num_kv_heads);
    add_int(g.kv_shared ? g.donor : -1);
    add_int(g.k_eq_v);
  }
  const Checkpoint& ckpt = weights.checkpoint();
  for (const std::string& name : ckpt.Names()) {
    const TensorInfo* t = ckpt.Find(name);
    if (!t) continue;
    h.Add(name);
    add_int(static_cast<int>(t->dtype));
    for (int64_t d : t->shape) add_int(d);
    add_int(static_cast<int64_t>(t->nbytes));
    constexpr size_t kSamples = 16, kSpan = 64;
    if (t->nbytes <= kSamples * kSpan) {
      h.Add(t->data, t->nbytes);
    } else {
      for (size_t s = 0; s < kSamples; ++s) h.Add(t->data + (t->nbytes - kSpan) * s / (kSamples - 1), kSpan);
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.h));
  return buf;
}

}  // namespace g4
