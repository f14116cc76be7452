#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kv/layer_cache.h"

namespace g4 {
namespace {

class ContiguousCache final : public LayerCache {
 public:
  explicit ContiguousCache(int64_t width) : width_(width) {}

  KvView AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) override {
    const size_t old = k_.size();
    k_.resize(old + n * width_);
    v_.resize(old + n * width_);
    std::memcpy(k_.data() + old, k, n * width_ * sizeof(float));
    std::memcpy(v_.data() + old, v, n * width_ * sizeof(float));
    pos_.insert(pos_.end(), pos, pos + n);
    return KvView{k_.data(), v_.data(), pos_.data(), static_cast<int64_t>(pos_.size()), width_};
  }
  int64_t offset() const override { return static_cast<int64_t>(pos_.size()); }
  size_t allocated_bytes() const override {
    return (k_.capacity() + v_.capacity()) * sizeof(float) + pos_.capacity() * sizeof(int32_t);
  }
  size_t bytes_per_token() const override { return 2 * width_ * sizeof(float); }
  std::string signature() const override { return "kv:plain"; }

 private:
  int64_t width_;
  std::vector<float> k_, v_;
  std::vector<int32_t> pos_;
};

class RingCache final : public LayerCache {
 public:
  RingCache(int64_t width, int window)
      : width_(width), window_(window), k_(width * window), v_(width * window), pos_(window, -1) {}

  KvView AppendAndView(const float* k, const float* v, const int32_t* pos, int64_t n) override {
    if (n == 1) {  // decode: overwrite the slot whose key just left the window
      Write(k, v, pos[0]);
      ++offset_;
      return KvView{k_.data(), v_.data(), pos_.data(), std::min<int64_t>(offset_, window_), width_};
    }
    // Prefill chunk: the view is [retained keys..., new keys...] in scratch,
    // so early queries of the chunk still see keys the ring will drop.
    const int64_t kept = std::min<int64_t>(offset_, window_);
    scratch_k_.resize((kept + n) * width_);
    scratch_v_.resize((kept + n) * width_);
    scratch_pos_.resize(kept + n);
    std::memcpy(scratch_k_.data(), k_.data(), kept * width_ * sizeof(float));
    std::memcpy(scratch_v_.data(), v_.data(), kept * width_ * sizeof(float));
    std::memcpy(scratch_pos_.data(), pos_.data(), kept * sizeof(int32_t));
    std::memcpy(scratch_k_.data() + kept * width_, k, n * width_ * sizeof(float));
    std::memcpy(scratch_v_.data() + kept * width_, v, n * width_ * sizeof(float));
    std::memcpy(scratch_pos_.data() + kept, pos, n * sizeof(int32_t));
    for (int64_t i = std::max<int64_t>(0, n - window_); i < n; ++i) Write(k + i * width_, v + i * width_, pos[i]);
    offset_ += n;
    return KvView{scratch_k_.data(), scratch_v_.data(), scratch_pos_.data(), kept + n, width_};
  }
  int64_t offset() const override { return offset_; }
  size_t allocated_bytes() const override {
    return (k_.size() + v_.size() + scratch_k_.capacity() + scratch_v_.capacity()) * sizeof(float) +
           (pos_.size() + scratch_pos_.capacity()) * sizeof(int32_t);
  }
  size_t bytes_per_token() const override { return offset_ >= window_ ? 0 : 2 * width_ * sizeof(float); }
  std::string signature() const override { return "kv:ring:" + std::to_string(window_) + "+kv:plain"; }

 private:
  void Write(const float* k, const float* v, int32_t p) {
    const int64_t slot = p % window_;
    std::memcpy(k_.data() + slot * width_, k, width_ * sizeof(float));
    std::memcpy(v_.data() + slot * width_, v, width_ * sizeof(float));
    pos_[slot] = p;
  }
  int64_t width_;
  int window_;
  int64_t offset_ = 0;
  std::vector<float> k_, v_;
  std::vector<int32_t> pos_;
  std::vector<float> scratch_k_, scratch_v_;
  std::vector<int32_t> scratch_pos_;
};

}  // namespace

std::unique_ptr<LayerCache> MakeContiguousCache(int64_t width) { return std::make_unique<ContiguousCache>(width); }
std::unique_ptr<LayerCache> MakeRingCache(int64_t width, int window) {
  G4_CHECK(window > 0);
  return std::make_unique<RingCache>(width, window);
}

}  // namespace g4
