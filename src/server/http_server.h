// HttpServer: binds the endpoints to cpp-httplib and serves them.
//
//   GET  /                           the chat page (open)
//   GET  /health                     {"status": "ok"} (open; 503 while shutting down)
//   GET  /metrics                    Prometheus text
//   GET  /v1/models, /v1/models/ID   the served model
//   POST /v1/chat/completions        OpenAI chat (stream or not)
//   POST /v1/completions             OpenAI text completion
//   POST /v1/messages                Anthropic messages (stream or not)
//   POST /v1/messages/count_tokens   Anthropic token count
//
// With an API key, every endpoint but "/" and /health needs it (401
// otherwise). Errors are JSON in the shape of the API the path belongs to
// (Anthropic under /v1/messages, OpenAI elsewhere), including the ones
// httplib produces itself (404, 413 for bodies over the limit, 400 for a
// malformed request line). Socket reads and writes time out, so a slow or
// half-open client holds a worker thread for at most the timeout.
//
// Threading: Bind, then Serve on one thread (it blocks until Stop); Stop may
// be called from any thread.
#pragma once

#include <memory>

#include "core/status.h"
#include "server/server_context.h"

namespace httplib {
class Server;
}

namespace g4::server {

class HttpServer {
 public:
  // `bundle`, `loop` and `metrics` must outlive the server.
  HttpServer(const ServerOptions& options, const ModelBundle& bundle, StepLoop& loop, Metrics& metrics, int max_seqs);
  ~HttpServer();

  // Binds the listening socket; the port (the one picked when options.port
  // is 0). IoError when the address cannot be bound.
  StatusOr<int> Bind();
  // Serves until Stop; returns once every worker thread has finished its
  // request.
  void Serve();
  // Stops accepting connections; requests in progress go on.
  void Stop();

 private:
  void Route();
  ServerOptions options_;
  ServerContext ctx_;
  std::unique_ptr<httplib::Server> http_;
};

}  // namespace g4::server
