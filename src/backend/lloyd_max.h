// Lloyd-Max codebooks: the MSE-optimal scalar quantizers of a unit normal,
// used by TurboQuant for values (after rotation a value group is close to
// Gaussian, and dividing by its RMS makes it unit-variance). Tables are
// generated offline by src/backend/tools/gen_lloyd_max.cc (Lloyd's algorithm on
// the exact N(0,1) density) and checked in, so encodings never depend on the
// libm a build links against.
#pragma once

#include <cstdint>

namespace g4 {

struct LloydMaxCodebook {
  int bits = 0;
  const float* centroids = nullptr;   // [2^bits], ascending, symmetric about 0
  const float* boundaries = nullptr;  // [2^bits - 1]: midpoints of neighbouring centroids
  double distortion = 0;              // E[(X - Q(X))^2] for X ~ N(0,1)

  int levels() const { return 1 << bits; }
  // Index of the cell holding y: the number of boundaries strictly below y.
  // A branch-free binary search (the comparisons are data-dependent coin
  // flips, so branches would mispredict half the time).
  int Bucket(float y) const {
    int lo = 0;
    for (int step = levels() / 2; step >= 1; step /= 2) lo += boundaries[lo + step - 1] < y ? step : 0;
    return lo;
  }
};

// The codebook for 2, 3, 4, 5 or 8 bits; nullptr for any other width.
const LloydMaxCodebook* FindLloydMaxCodebook(int bits);

}  // namespace g4
