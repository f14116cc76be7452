// Reading a checkpoint from a cold disk with a progress bar. g4 maps the
// weights; on a cold page cache the first forward pass faults in gigabytes
// without a word. When most of the weight files are not resident, they are
// read once, sequentially, before the model loads, showing progress; the
// mapping then finds them in the page cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace g4::cli {

// The weight files of a checkpoint directory: the index's shards, else
// model.safetensors, else every *.safetensors.
std::vector<std::string> WeightFiles(const std::string& dir);

struct Residency {
  uint64_t bytes = 0;     // total size of the files
  uint64_t resident = 0;  // bytes in the page cache (mincore)
};
Residency MeasureResidency(const std::vector<std::string>& files);

// Reads `dir`'s weight files with a progress bar when stderr is a terminal,
// `show` is set and at least 16 MiB and a quarter of them are not resident.
// Returns the bytes read (0 when nothing was done). Errors are ignored: the
// loader reports them properly afterwards.
uint64_t WarmCheckpoint(const std::string& dir, bool show);

}  // namespace g4::cli
