// src/backend/cuda/turbo_lane_codes.cuh compiled as C++ against the SIMT
// emulator's headers: a lane's run of codes read as words gives Unpack's
// codes at every width, lane and element, and the key and value runs give
// DecodeKey's and DecodeValue's bits, on random records. The streaming
// split kernel's decoders; tests/backend checks that kernel on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/turbo_lane_codes.cuh"

namespace g4::cuda {
namespace {

// 32 lanes' codes of a head slice plus room after, 16-byte aligned.
struct Bytes {
  alignas(16) uint8_t b[32 * 16 + 64];
};

void Randomize(uint8_t* p, size_t n, std::mt19937& rng) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}

template <int D32, int B>
void ExpectRunsAreUnpacks(std::mt19937& rng) {
  Bytes s;
  Randomize(s.b, sizeof(s.b), rng);
  for (int lane = 0; lane < 32; ++lane) {
    LaneCodes<D32, B> c;
    c.Load(s.b, lane * D32);
    for (int i = 0; i < D32; ++i)
      ASSERT_EQ(c.At(i), Unpack(s.b, lane * D32 + i, B))
          << "D32 " << D32 << " bits " << B << " lane " << lane << " element " << i;
  }
}

TEST(TurboLaneCodesSim, RunsGiveUnpacksCodes) {
  std::mt19937 rng(41);
  for (int round = 0; round < 20; ++round) {
    ExpectRunsAreUnpacks<8, 1>(rng);
    ExpectRunsAreUnpacks<8, 2>(rng);
    ExpectRunsAreUnpacks<8, 3>(rng);
    ExpectRunsAreUnpacks<8, 4>(rng);
    ExpectRunsAreUnpacks<8, 5>(rng);
    ExpectRunsAreUnpacks<8, 6>(rng);
    ExpectRunsAreUnpacks<8, 7>(rng);
    ExpectRunsAreUnpacks<8, 8>(rng);
    ExpectRunsAreUnpacks<16, 1>(rng);
    ExpectRunsAreUnpacks<16, 2>(rng);
    ExpectRunsAreUnpacks<16, 3>(rng);
    ExpectRunsAreUnpacks<16, 4>(rng);
    ExpectRunsAreUnpacks<16, 5>(rng);
    ExpectRunsAreUnpacks<16, 6>(rng);
    ExpectRunsAreUnpacks<16, 7>(rng);
    ExpectRunsAreUnpacks<16, 8>(rng);
  }
}

// A one-head turbo record part as the streaming kernel keeps it: key
// [codes][steps][zeros], value [codes][scales], random bytes (fp16 planes
// drawn as finite halves), head_dim 32 * D32.
struct TurboPart {
  DevKvFormat f;
  std::vector<uint8_t> key, value;  // 16 spare bytes after each
  std::vector<float> centroids;
};

uint16_t FiniteHalf(std::mt19937& rng) {
  uint16_t h;
  do h = static_cast<uint16_t>(rng()); while ((h & 0x7C00) == 0x7C00);  // not inf or NaN
  return h;
}

TurboPart MakePart(int d, int key_bits, int value_bits, std::mt19937& rng) {
  TurboPart t;
  DevKvFormat& f = t.f;
  f.kind = kKvTurbo;
  f.key_bits = key_bits, f.value_bits = value_bits;
  f.heads = 1, f.head_dim = d;
  const int key_codes = d * key_bits / 8, value_codes = d * value_bits / 8, plane = d / 16;
  f.k_codes = 0, f.k_scales = key_codes, f.k_biases = key_codes + plane;
  f.v_codes = 0, f.v_scales = value_codes;
  t.key.resize(key_codes + 2 * plane + 16);
  t.value.resize(value_codes + plane + 16);
  Randomize(t.key.data(), key_codes, rng);
  Randomize(t.value.data(), value_codes, rng);
  for (int g = 0; g < d / 32; ++g) {
    Store16(&t.key[f.k_scales + 2 * g], FiniteHalf(rng));
    Store16(&t.key[f.k_biases + 2 * g], FiniteHalf(rng));
    Store16(&t.value[f.v_scales + 2 * g], FiniteHalf(rng));
  }
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int k = 0; k < (1 << value_bits); ++k) t.centroids.push_back(u(rng));
  return t;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

template <int D32>
void ExpectRunsDecodeAsTheCodec(int key_bits, int value_bits, std::mt19937& rng) {
  const TurboPart t = MakePart(32 * D32, key_bits, value_bits, rng);
  const std::string what = "D32 " + std::to_string(D32) + " k" + std::to_string(key_bits) + "v" +
                           std::to_string(value_bits);
  for (int lane = 0; lane < 32; ++lane) {
    const int e0 = lane * D32;
    float k[D32], v[D32];
    ASSERT_TRUE(TurboKeyRunAny<D32>(t.f, t.key.data(), e0, k)) << what;
    ASSERT_TRUE(TurboValueRunAny<D32>(t.f, t.value.data(), e0, t.centroids.data(), v)) << what;
    for (int i = 0; i < D32; ++i) {
      ASSERT_TRUE(SameBits(k[i], DecodeKey(t.f, t.key.data(), e0 + i))) << what << " key element " << e0 + i;
      ASSERT_TRUE(SameBits(v[i], DecodeValue(t.f, t.value.data(), e0 + i, t.centroids.data())))
          << what << " value element " << e0 + i;
    }
  }
}

TEST(TurboLaneCodesSim, KeyAndValueRunsGiveTheCodecsBits) {
  std::mt19937 rng(42);
  for (int kb : {2, 4, 5, 8})
    for (int vb : {2, 3, 4, 5, 8}) {
      ExpectRunsDecodeAsTheCodec<8>(kb, vb, rng);
      ExpectRunsDecodeAsTheCodec<16>(kb, vb, rng);
    }
}

TEST(TurboLaneCodesSim, OtherWidthsAreLeftToTheCaller) {
  std::mt19937 rng(43);
  const TurboPart t = MakePart(256, 3, 6, rng);  // widths no KvCodecSpec makes
  float out[8];
  EXPECT_FALSE(TurboKeyRunAny<8>(t.f, t.key.data(), 0, out));
  EXPECT_FALSE(TurboValueRunAny<8>(t.f, t.value.data(), 0, t.centroids.data(), out));
}

}  // namespace
}  // namespace g4::cuda
