// g4 serve MODEL: an OpenAI- and Anthropic-compatible HTTP server over
// the batched engine (docs/server.md). One step-loop thread drives the
// scheduler; HTTP worker threads parse requests and stream results.
//
// SIGTERM or SIGINT: stop accepting, let running requests finish for
// --grace seconds, cancel the rest, flush the prefix cache's disk tier,
// exit 0. A second signal skips the grace period.
#include <pthread.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "cli/cli_util.h"
#include "cli/command_line.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "core/mapped_file.h"
#include "engine/kv_disk_cache.h"
#include "engine/model_bundle.h"
#include "engine/prefix_cache.h"
#include "kv/checksum.h"
#include "kv/model_fingerprint.h"
#include "server/http_server.h"

namespace g4::cli {
namespace {

struct ServeFlags {
  CommonFlags common;
  std::string model_dir;  // resolved from common.model
  std::string backend = "auto";
  std::string kv = "plain:bf16";
  int64_t step_tokens = 512;
  int max_seqs = 16;
  std::string kv_memory = "0";
  uint64_t gpu_memory = 0;
  std::string prefix_cache = "auto";
  std::string kv_cache_dir;
  std::string kv_cache_dir_bytes = "0";
  double grace = 10;
  server::ServerOptions server;
  std::string model_name;
  std::string max_body = "8M";
};

void Log(const std::string& line) {
  std::fprintf(stderr, "[g4 serve] %s\n", line.c_str());
  std::fflush(stderr);
}

std::string TokenizerHash(const std::string& dir) {
  auto text = ReadFileToString(dir + "/tokenizer.json");
  if (!text.ok()) return "";
  Fnv1a64 h;
  h.Add(text->data(), text->size());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h.h));
  return buf;
}

Status Serve(ServeFlags f) {
  const auto t0 = std::chrono::steady_clock::now();
  // Signals go to the thread that waits for them, not to workers.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a crash

  G4_ASSIGN_OR_RETURN(std::unique_ptr<ModelBundle> bundle, LoadBundle(f.common, f.backend, &f.model_dir));
  EngineOptions eo;
  eo.kv = f.kv;
  eo.max_step_tokens = f.step_tokens;
  eo.max_seqs = f.max_seqs;
  G4_ASSIGN_OR_RETURN(eo.kv_budget_bytes, ParseBytes(f.kv_memory, "--kv-memory"));
  eo.memory_cap_bytes = f.gpu_memory;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*bundle->model, eo));

  std::unique_ptr<KvDiskCache> disk;
  std::unique_ptr<PrefixCache> cache;
  PrefixCacheOptions po;
  if (f.prefix_cache == "auto") {
    po.max_bytes = engine->pool().capacity_bytes() / 2;
  } else {
    G4_ASSIGN_OR_RETURN(po.max_bytes, ParseBytes(f.prefix_cache, "--prefix-cache"));
  }
  if (!f.kv_cache_dir.empty()) {
    if (po.max_bytes == 0) return InvalidArgument("[serve] --kv-cache-dir needs the prefix cache (--prefix-cache)");
    KvDiskCacheOptions d;
    d.dir = f.kv_cache_dir;
    d.identity.model_fingerprint = ModelFingerprint(bundle->model->config(), bundle->model->weights());
    d.identity.tokenizer_hash = TokenizerHash(f.model_dir);
    d.scheme = engine->pool().scheme().signature();
    G4_ASSIGN_OR_RETURN(d.max_bytes, ParseBytes(f.kv_cache_dir_bytes, "--kv-cache-dir-bytes"));
    d.log = [](const std::string& line) { Log("kv cache: " + line); };
    G4_ASSIGN_OR_RETURN(disk, KvDiskCache::Open(std::move(d)));
    Log("kv cache: " + std::to_string(disk->entries()) + " entries on disk in " + f.kv_cache_dir);
  }
  if (po.max_bytes > 0) cache = std::make_unique<PrefixCache>(engine->pool(), po, disk.get());

  server::Metrics metrics;
  server::StepLoop loop(*engine, cache.get(), metrics, Log);
  f.server.limits.context = bundle->model->config().max_position_embeddings;
  G4_ASSIGN_OR_RETURN(f.server.max_body_bytes, ParseBytes(f.max_body, "--max-body"));
  std::string name = f.model_name;
  // The model as typed ("models/demo" -> "demo", "google/gemma-4-e4b-it" ->
  // "gemma-4-e4b-it"), not the resolved directory (a snapshot hash in the
  // Hugging Face cache).
  const std::filesystem::path typed = std::filesystem::path(f.common.model).lexically_normal();
  if (name.empty()) name = typed.filename().string();
  if (name.empty()) name = typed.parent_path().filename().string();
  if (!name.empty()) f.server.model_id = name;
  if (f.server.api_key.empty())
    if (const char* env = std::getenv("G4_API_KEY")) f.server.api_key = env;
  server::HttpServer http(f.server, *bundle, loop, metrics, f.max_seqs);
  G4_ASSIGN_OR_RETURN(int port, http.Bind());
  loop.Start();

  std::atomic<bool> served{false};
  std::thread waiter([&] {
    timespec tick{0, 50 * 1000 * 1000};
    while (!served.load()) {
      if (sigtimedwait(&signals, nullptr, &tick) < 0) continue;
      Log("shutting down: no new requests; " + std::to_string(loop.in_flight()) + " in flight, up to " +
          std::to_string(f.grace) + " s to finish");
      loop.BeginDrain();
      http.Stop();
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.grace);
      while (loop.in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
        if (sigtimedwait(&signals, nullptr, &tick) >= 0) break;  // a second signal: no grace
      }
      if (loop.in_flight() > 0) Log("cancelling " + std::to_string(loop.in_flight()) + " requests");
      loop.CancelAll();
      return;
    }
  });
  const double ready = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("g4 serve: %s ready in %.2f s, listening on http://%s:%d\n", f.server.model_id.c_str(), ready,
              f.server.host.c_str(), port);
  std::fflush(stdout);
  http.Serve();
  served.store(true);
  waiter.join();
  loop.Stop();  // flushes the disk tier
  if (disk) Log("kv cache: " + std::to_string(disk->entries()) + " entries on disk");
  Log("stopped");
  return Status::Ok();
}

}  // namespace

int RunServe(int argc, char** argv) {
  CLI::App app{"Serve a model over HTTP: OpenAI and Anthropic APIs, and a chat page at /", "g4 serve"};
  ServeFlags f;
  auto& o = f.server;
  std::string positional_model;
  app.add_option("MODEL", positional_model, "the model (same as -m)");
  AddCommonFlags(app, f.common, kModelFlag | kThreadsFlag);
  app.add_option("--host", o.host, "address to listen on (0.0.0.0: every interface)")->capture_default_str();
  app.add_option("--port", o.port, "port (0: any free port)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--api-key", o.api_key, "require this key (Bearer or x-api-key) on every endpoint but / and /health; "
                                         "default: $G4_API_KEY");
  app.add_option("--model-name", f.model_name, "the model id clients see (default: the directory's name)");
  app.add_option("--backend", f.backend, "where to run: cpu, cuda, or auto")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--kv", f.kv, "KV cache scheme (docs/kv-cache.md)")->capture_default_str();
  app.add_option("--step-tokens,--chunk", f.step_tokens, "tokens per engine step (decode rows + prefill chunks)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-seqs,--max-batch", f.max_seqs, "sequences running at once")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--max-queue", o.max_queue, "requests waiting beyond --max-seqs before 429")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-tokens", o.limits.default_max_tokens, "max_tokens of a request that sets none")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  AddGpuMemoryFlag(app, f.gpu_memory);
  app.add_option("--kv-memory", f.kv_memory,
                 "KV pool size, e.g. 4G (0: what --gpu-memory leaves, else half the backend's free memory)")
      ->capture_default_str();
  app.add_option("--prefix-cache", f.prefix_cache, "bytes of cached prefixes kept in the pool (0: off; auto: half "
                                                   "the pool)")
      ->capture_default_str();
  app.add_option("--kv-cache-dir", f.kv_cache_dir, "keep evicted prefixes on disk here (.g4kv), across restarts");
  app.add_option("--kv-cache-dir-bytes", f.kv_cache_dir_bytes, "size limit of --kv-cache-dir (0: none)")
      ->capture_default_str();
  app.add_option("--max-body", f.max_body, "largest request body")->capture_default_str();
  app.add_option("--timeout", o.timeout_seconds, "seconds a socket read or write may wait (slow clients)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--http-threads", o.threads, "HTTP worker threads (0: max-seqs + max-queue + 8)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--grace", f.grace, "seconds running requests get to finish after SIGTERM")->capture_default_str();
  if (auto code = ParseCommandLine(app, "serve", argc, argv)) return *code;
  Status s = FinishCommonFlags(f.common, {&positional_model});
  if (!s.ok()) return Fail("serve", s);
  s = Serve(std::move(f));
  if (!s.ok()) return Fail("serve", s);
  return 0;
}

}  // namespace g4::cli
