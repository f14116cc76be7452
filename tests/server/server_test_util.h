// Test helpers for the HTTP server: an in-process server on the demo model
// (a free port, its own engine and step loop), plain requests through
// httplib's client, and a raw socket for streams a test reads part of and
// then abandons (a client going away).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <httplib.h>
#include <memory>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "engine/model_bundle.h"
#include "engine/prefix_cache.h"
#include "server/http_server.h"
#include "server/json_util.h"
#include "test_util.h"

namespace g4::server::testing {

// The demo model, loaded once per test binary.
inline ModelBundle& Demo() {
  static ModelBundle* b = [] {
    auto r = LoadModelBundle(g4::testing::DemoModelDir(), "cpu");
    if (!r.ok()) {
      std::fprintf(stderr, "cannot load the demo model: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    return r->release();
  }();
  return *b;
}

struct TestServerOptions {
  int max_seqs = 4;
  size_t kv_bytes = size_t{64} << 20;
  size_t cache_bytes = size_t{16} << 20;  // 0: no prefix cache
  ServerOptions server;
};

class TestServer {
 public:
  explicit TestServer(TestServerOptions o = {}) : o_(std::move(o)) {
    ::signal(SIGPIPE, SIG_IGN);
    EngineOptions eo;
    eo.max_seqs = o_.max_seqs;
    eo.max_step_tokens = 64;
    eo.kv_budget_bytes = o_.kv_bytes;
    auto e = Engine::Create(*Demo().model, eo);
    if (!e.ok()) std::abort();
    engine_ = std::move(e).value();
    if (o_.cache_bytes > 0) {
      PrefixCacheOptions po;
      po.max_bytes = o_.cache_bytes;
      cache_ = std::make_unique<PrefixCache>(engine_->pool(), po);
    }
    loop_ = std::make_unique<StepLoop>(*engine_, cache_.get(), metrics_, nullptr);
    o_.server.port = 0;
    o_.server.model_id = "demo";
    o_.server.limits.context = Demo().model->config().max_position_embeddings;
    http_ = std::make_unique<HttpServer>(o_.server, Demo(), *loop_, metrics_, o_.max_seqs);
    auto port = http_->Bind();
    if (!port.ok()) std::abort();
    port_ = *port;
    loop_->Start();
    thread_ = std::thread([this] { http_->Serve(); });
  }
  ~TestServer() {
    loop_->BeginDrain();
    loop_->CancelAll();
    http_->Stop();
    thread_.join();
    loop_->Stop();
  }
  int port() const { return port_; }
  StepLoop& loop() { return *loop_; }
  Metrics& metrics() { return metrics_; }
  KvPool& pool() { return engine_->pool(); }

 private:
  TestServerOptions o_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<PrefixCache> cache_;
  Metrics metrics_;
  std::unique_ptr<StepLoop> loop_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
  int port_ = 0;
};

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
  Json json() const { return Json::parse(body, nullptr, false); }
};

inline Reply Call(int port, const std::string& method, const std::string& path, const std::string& body = "",
                  httplib::Headers headers = {}) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(60, 0);
  httplib::Result r = method == "GET" ? cli.Get(path.c_str(), headers)
                                      : cli.Post(path.c_str(), headers, body, "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.body = r->body;
  out.content_type = r->get_header_value("Content-Type");
  return out;
}

// Decodes a chunked HTTP/1.1 body (what the raw stream reads).
inline std::string Dechunk(const std::string& raw) {
  std::string out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    if (n == 0 || eol + 2 + n > raw.size()) break;
    out += raw.substr(eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

// A request on a raw socket: the test reads as much as it likes, then may
// simply close (the client going away).
class RawStream {
 public:
  RawStream(int port, const std::string& path, const std::string& body) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) std::abort();
    const std::string req = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    if (::write(fd_, req.data(), req.size()) != static_cast<ssize_t>(req.size())) std::abort();
  }
  ~RawStream() { Close(); }
  // Reads until `needle` appears in what was read, or the timeout passes.
  bool ReadUntil(const std::string& needle, int timeout_ms = 30000) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (got_.find(needle) == std::string::npos) {
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count());
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, left) <= 0) return false;
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) return got_.find(needle) != std::string::npos;
      got_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const std::string& got() const { return got_; }

 private:
  int fd_ = -1;
  std::string got_;
};

// The value of a metric line "NAME VALUE" (or with labels: pass the whole
// "name{...}" prefix); -1 when absent.
inline double MetricValue(int port, const std::string& name) {
  const Reply r = Call(port, "GET", "/metrics");
  size_t pos = 0;
  while ((pos = r.body.find(name + " ", pos)) != std::string::npos) {
    if (pos == 0 || r.body[pos - 1] == '\n') return std::stod(r.body.substr(pos + name.size() + 1));
    pos += name.size();
  }
  return -1;
}

// Polls `pred` for up to `seconds`.
template <typename F>
bool Eventually(F pred, double seconds = 20) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

}  // namespace g4::server::testing
