// g4 bench: prefill and greedy-decode speed of one model on this machine, with
// the bytes a decode step must read, so decode speed can be compared against
// the memory bandwidth a plain copy achieves (decode is bandwidth-bound).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/cli_util.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/backend_factory.h"
#include "engine/engine.h"

namespace g4::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

struct BenchOptions {
  CommonFlags common;
  std::string model_dir;  // resolved
  int prompt = 512;
  int gen = 64;
  int batch = 1;
  int warmup = 2;  // untimed decode steps before the timed ones
  int copy_mib = 1024;
  EngineFlags engine;
};

struct BenchResult {
  std::string backend;
  double load_s = 0, prefill_s = 0, decode_s = 0;
  size_t weight_bytes_per_token = 0, kv_bytes_per_token = 0, checkpoint_bytes = 0, peak_rss = 0;
  double copy_gb_s = 0;  // 0 when not measured
  int warmup = 0;         // warm-up steps run
  int64_t kv_context = 0;  // the timed steps' mean cached tokens, for kv_bytes_per_token
};

// K and V bytes one decode step reads at `context` cached tokens: every
// layer reads the records of the keys it sees (a sliding layer its window);
// a KV-shared layer reads its donor's again (bytes read, not stored).
size_t KvBytesPerToken(const Gemma4Config& c, const KvScheme& scheme, int64_t context) {
  size_t total = 0;
  for (const LayerGeometry& own : c.layers) {
    const LayerGeometry& g = own.kv_shared && own.donor >= 0 ? c.layers[own.donor] : own;
    const bool sliding = g.type == AttentionType::kSliding;
    const int64_t retained = sliding ? std::min<int64_t>(c.sliding_window, context) : context;
    const LayerKvSpec& spec = sliding ? scheme.sliding : scheme.full;
    auto format = KvRecordFormat::Make(spec.codec, g.num_kv_heads, g.head_dim);
    const int64_t record = format.ok() ? format->record_bytes : 0;
    total += static_cast<size_t>(retained) * record;
  }
  return total;
}

// Collects a sequence's KV at the end of its prefill.
class KeepSink final : public SequenceSink {
 public:
  void OnFinish(FinishReason, KvSeq seq, const Status& status) override {
    seq_ = std::move(seq);
    status_ = status;
  }
  KvSeq seq_;
  Status status_;
};

// Best-of-3 parallel memcpy of `bytes`, counting read + write traffic.
StatusOr<double> CopyBandwidthGbps(size_t bytes) {
  std::unique_ptr<char[]> src(new (std::nothrow) char[bytes]), dst(new (std::nothrow) char[bytes]);
  if (!src || !dst) return ResourceExhausted("[bench] cannot allocate 2 x " + std::to_string(bytes) + " bytes");
  std::memset(src.get(), 1, bytes);  // fault the pages in before timing
  std::memset(dst.get(), 0, bytes);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
#pragma omp parallel
    {
      const size_t nt = omp_get_num_threads(), id = omp_get_thread_num();
      const size_t per = (bytes / nt + 63) / 64 * 64;
      const size_t begin = std::min(bytes, id * per), end = std::min(bytes, begin + per);
      std::memcpy(dst.get() + begin, src.get() + begin, end - begin);
    }
    best = std::min(best, Seconds(t0));
  }
  if (dst[bytes / 2] != 1) return Internal("[bench] memcpy check failed");
  return 2.0 * bytes / best / 1e9;
}

// Best-of-3 device-to-device copy of `bytes` through the backend (a GPU's
// memory bandwidth), counting read + write traffic.
StatusOr<double> DeviceCopyBandwidthGbps(Backend& backend, size_t bytes) {
  G4_ASSIGN_OR_RETURN(DeviceBuffer src, backend.Allocate(bytes, "bench copy"));
  G4_ASSIGN_OR_RETURN(DeviceBuffer dst, backend.Allocate(bytes, "bench copy"));
  backend.CopyOnDevice(dst.data(), src.data(), bytes);  // warm-up
  backend.Sync();
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    backend.CopyOnDevice(dst.data(), src.data(), bytes);
    backend.Sync();
    best = std::min(best, Seconds(t0));
  }
  return 2.0 * bytes / best / 1e9;
}

StatusOr<BenchResult> RunBenchImpl(const BenchOptions& o) {
  if (o.prompt < 1) return InvalidArgument("--prompt must be at least 1");
  if (o.gen < 1) return InvalidArgument("--gen must be at least 1");
  if (o.batch < 1) return InvalidArgument("--batch must be at least 1");
  BenchResult r;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, MakeBackend(o.engine.backend));
  r.backend = backend->Describe();
  Verbose(o.common, "backend " + r.backend + " (OpenMP threads " + std::to_string(omp_get_max_threads()) + "), kv " +
                        o.engine.kv + ", chunk " + std::to_string(o.engine.chunk) + ", batch " + std::to_string(o.batch) +
                        ", prompt " + std::to_string(o.prompt) + ", gen " + std::to_string(o.gen));
  // A device backend's decode reads device memory: measure that copy.
  const bool device_copy = backend->space() == MemorySpace::kDevice && o.copy_mib > 0;
  if (device_copy) {
    G4_ASSIGN_OR_RETURN(r.copy_gb_s, DeviceCopyBandwidthGbps(*backend, static_cast<size_t>(o.copy_mib) << 20));
  }
  auto t0 = Clock::now();
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Gemma4Model> model, Gemma4Model::Load(o.model_dir, *backend));
  r.load_s = Seconds(t0);
  const Gemma4Config& c = model->config();
  const int64_t V = model->vocab_size();
  EngineOptions eo = ToEngineOptions(o.engine);
  eo.max_seqs = o.batch;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*model, eo));
  Scheduler& sched = engine->scheduler();

  // Fixed pseudo-random prompts: speed does not depend on which ids.
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
  std::vector<KeepSink> prefill(o.batch);
  t0 = Clock::now();
  for (int b = 0; b < o.batch; ++b) {
    SequenceRequest req;
    req.prompt.resize(o.prompt);
    for (int32_t& id : req.prompt) id = pick(rng);
    req.sink = &prefill[b];
    G4_ASSIGN_OR_RETURN(RequestId id, sched.Submit(std::move(req)));
    (void)id;
  }
  G4_RETURN_IF_ERROR(sched.RunUntilIdle());
  r.prefill_s = Seconds(t0);

  // Warm-up: `warmup` untimed decode steps of the same shape, so that the
  // timed ones are steady state. A device backend runs a step's first key
  // op by op and records it (a CUDA graph) on the second, which costs
  // milliseconds; llama-bench likewise decodes before it times.
  // Where the context cannot hold them beside the prompt and the timed
  // steps, fewer (the output says how many ran).
  const int64_t ctx = c.max_position_embeddings;
  r.warmup = ctx > 0 ? static_cast<int>(std::clamp<int64_t>(ctx - (int64_t{o.prompt} + 1 + o.gen), 0, o.warmup))
                     : o.warmup;
  // Every sequence in `from` continues greedily for `steps` steps (the
  // first runs a new token, the last sample is not run), into `to`.
  auto continue_all = [&](std::vector<KeepSink>& from, std::vector<KeepSink>& to, int steps) -> Status {
    for (int b = 0; b < o.batch; ++b) {
      G4_RETURN_IF_ERROR(from[b].status_);
      SequenceRequest req;
      req.seq = std::move(from[b].seq_);
      req.prompt = {pick(rng)};
      req.max_new_tokens = steps;
      req.sampling.temperature = 0;
      req.sink = &to[b];
      G4_ASSIGN_OR_RETURN(RequestId id, sched.Submit(std::move(req)));
      (void)id;
    }
    return Status::Ok();
  };
  std::vector<KeepSink> warm(o.batch);
  if (r.warmup > 0) {
    G4_RETURN_IF_ERROR(continue_all(prefill, warm, r.warmup));
    G4_RETURN_IF_ERROR(sched.RunUntilIdle());
  }

  // Decode: every sequence continues from its prompt (and warm-up), greedy,
  // `gen` tokens, all rows in every step.
  std::vector<KeepSink> decode(o.batch);
  G4_RETURN_IF_ERROR(continue_all(r.warmup > 0 ? warm : prefill, decode, o.gen));
  t0 = Clock::now();
  G4_RETURN_IF_ERROR(sched.RunUntilIdle());
  r.decode_s = Seconds(t0);
  for (const KeepSink& k : decode) G4_RETURN_IF_ERROR(k.status_);

  r.weight_bytes_per_token = model->weights().DecodeBytesPerToken(c);
  r.kv_context = int64_t{o.prompt} + r.warmup + o.gen / 2;
  r.kv_bytes_per_token = KvBytesPerToken(c, engine->pool().scheme(), r.kv_context);
  r.checkpoint_bytes = model->weights().checkpoint().total_file_bytes();
  r.peak_rss = PeakRssBytes();  // before the copy test's buffers
  prefill.clear();  // the sequences go back to the pool before it goes
  warm.clear();
  decode.clear();
  engine.reset();
  model.reset();
  if (o.copy_mib > 0 && !device_copy) {
    G4_ASSIGN_OR_RETURN(r.copy_gb_s, CopyBandwidthGbps(static_cast<size_t>(o.copy_mib) << 20));
  }
  return r;
}

void Print(const BenchOptions& o, const BenchResult& r) {
  // Decode: the batch's rows, gen tokens each (one step per token).
  const double prefill_tps = static_cast<double>(o.prompt) * o.batch / r.prefill_s;
  const double row_tps = o.gen / r.decode_s, decode_tps = row_tps * o.batch;
  // A step reads the weights once for all rows and each row's KV.
  const double step_bytes = static_cast<double>(r.weight_bytes_per_token) +
                            static_cast<double>(r.kv_bytes_per_token) * o.batch;
  const double decode_gbps = step_bytes * row_tps / 1e9;
  if (o.common.json) {
    nlohmann::ordered_json j;
    j["model"] = o.common.model;
    j["model_dir"] = o.model_dir;
    j["backend"] = r.backend;
    j["kv"] = o.engine.kv;
    j["threads"] = omp_get_max_threads();
    j["batch"] = o.batch;
    j["prompt_tokens"] = o.prompt;
    j["gen_tokens"] = o.gen;
    j["warmup_steps"] = r.warmup;
    j["load_s"] = r.load_s;
    j["prefill_tok_s"] = prefill_tps;
    j["decode_tok_s"] = decode_tps;
    j["decode_tok_s_per_row"] = row_tps;
    j["ttft_ms"] = r.prefill_s * 1e3;
    j["weight_bytes_per_token"] = r.weight_bytes_per_token;
    j["kv_bytes_per_token"] = r.kv_bytes_per_token;
    j["peak_rss_bytes"] = r.peak_rss;
    j["checkpoint_bytes"] = r.checkpoint_bytes;
    j["decode_gb_s"] = decode_gbps;
    if (r.copy_gb_s > 0) {
      j["copy_gb_s"] = r.copy_gb_s;
      j["decode_efficiency"] = decode_gbps / r.copy_gb_s;
    }
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("model            %s (%.2f GB checkpoint), kv %s, batch %d\n", o.common.model.c_str(),
              r.checkpoint_bytes / 1e9, o.engine.kv.c_str(), o.batch);
  std::printf("backend          %s\n", r.backend.c_str());
  std::printf("load             %.2f s\n", r.load_s);
  std::printf("prefill          %d x %d tokens in %.2f s: %.1f tok/s\n", o.batch, o.prompt, r.prefill_s,
              prefill_tps);
  std::printf(
      "decode           %d x %d tokens in %.2f s: %.2f tok/s aggregate, %.2f tok/s per row (%.1f ms/step; after %d "
      "warm-up steps)\n",
      o.batch, o.gen, r.decode_s, decode_tps, row_tps, r.decode_s * 1e3 / o.gen, r.warmup);
  std::printf("bytes/token      weights %.1f MB + KV %.1f MB (at context %lld)\n", r.weight_bytes_per_token / 1e6,
              r.kv_bytes_per_token / 1e6, static_cast<long long>(r.kv_context));
  std::printf("decode traffic   %.2f GB/s", decode_gbps);
  if (r.copy_gb_s > 0)
    std::printf("; memcpy %.2f GB/s; efficiency %.0f%%", r.copy_gb_s, 100.0 * decode_gbps / r.copy_gb_s);
  std::printf("\npeak RSS         %.2f GB\n", r.peak_rss / 1e9);
}

}  // namespace

int RunBench(int argc, char** argv) {
  CLI::App app{"Measure prefill and greedy decode speed of a checkpoint (loading is timed cold or warm as found)",
               "g4 bench"};
  BenchOptions o;
  std::string positional_model;
  app.add_option("MODEL", positional_model, "the model (same as -m)");
  AddCommonFlags(app, o.common, kModelFlag | kThreadsFlag | kJsonFlag);
  app.add_option("--prompt", o.prompt, "prompt tokens (pseudo-random ids)")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  app.add_option("--gen", o.gen, "greedy decode steps")->check(CLI::Range(1, 1 << 24))->capture_default_str();
  app.add_option("--batch", o.batch, "sequences decoding together")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed decode steps before the timed ones (0: time the first steps too)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  AddEngineFlags(app, o.engine, "plain:bf16");
  app.add_option("--memcpy-mib", o.copy_mib,
                 "size of the memcpy bandwidth test, on the device for --backend cuda (0 skips it)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  if (auto code = ParseCommandLine(app, "bench", argc, argv)) return *code;
  Status s = FinishCommonFlags(o.common, {&positional_model});
  if (!s.ok()) return Fail("bench", s);
  StatusOr<std::string> dir = ResolveModel(o.common);
  if (!dir.ok()) return Fail("bench", dir.status());
  o.model_dir = *dir;
  StatusOr<BenchResult> r = RunBenchImpl(o);
  if (!r.ok()) return Fail("bench", r.status());
  Print(o, *r);
  return 0;
}

}  // namespace g4::cli
