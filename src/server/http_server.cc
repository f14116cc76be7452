#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>

#include "server/auth.h"
#include "server/handlers.h"
#include "server/static_page.h"

namespace g4::server {
namespace {

ApiFlavor FlavorOf(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAi;
}

// The endpoint label of /metrics: known paths only, so labels stay few.
std::string EndpointLabel(const std::string& path) {
  static const char* kKnown[] = {"/",        "/health",           "/metrics",
                                 "/v1/models", "/v1/chat/completions", "/v1/completions",
                                 "/v1/messages", "/v1/messages/count_tokens"};
  for (const char* k : kKnown)
    if (path == k) return k;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

}  // namespace

HttpServer::HttpServer(const ServerOptions& options, const ModelBundle& bundle, StepLoop& loop, Metrics& metrics,
                       int max_seqs)
    : options_(options),
      ctx_{options_, bundle, loop, metrics, max_seqs,
           std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
               .count()},
      http_(std::make_unique<httplib::Server>()) {
  Route();
}

HttpServer::~HttpServer() = default;

void HttpServer::Route() {
  httplib::Server& s = *http_;
  int threads = options_.threads;
  if (threads <= 0) threads = std::clamp(ctx_.max_seqs + options_.max_queue + 8, 16, 1024);
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.timeout_seconds, 0);
  s.set_write_timeout(options_.timeout_seconds, 0);
  s.set_keep_alive_timeout(options_.keep_alive_seconds);
  s.set_keep_alive_max_count(1000);
  s.set_tcp_nodelay(true);

  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path == "/health" || req.path == "/" || req.method == "OPTIONS")
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string key = PresentedKey(req.get_header_value("Authorization"), req.get_header_value("x-api-key"));
    if (ConstantTimeEquals(key, options_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    RespondError(res,
                 {401, key.empty() ? "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                                   : "invalid API key",
                  ""},
                 FlavorOf(req.path));
    res.set_header("WWW-Authenticate", "Bearer");
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own errors (no route, body too large, bad request line) get a
  // JSON body too.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = "error";
    switch (res.status) {
      case 404: message = "no such endpoint: " + req.method + " " + req.path; break;
      case 405: message = "method not allowed: " + req.method + " " + req.path; break;
      case 413: message = "the request body is too large"; break;
      case 414: message = "the request URI is too long"; break;
      case 400: message = "malformed HTTP request"; break;
      default: message = "HTTP error " + std::to_string(res.status); break;
    }
    res.set_content(ErrorBody({res.status, message, ""}, FlavorOf(req.path)), "application/json");
  });
  s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    RespondError(res, {500, what, ""}, FlavorOf(req.path));
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    ctx_.metrics.CountRequest(EndpointLabel(req.path), res.status);
  });

  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = ChatPageHtml();
    res.set_content(std::string(page), "text/html; charset=utf-8");
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ctx_.loop.draining()) {
      res.status = 503;
      res.set_content("{\"status\":\"draining\"}", "application/json");
      return;
    }
    res.set_content("{\"status\":\"ok\"}", "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx_.metrics.Render(), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request& q, httplib::Response& r) { HandleModels(ctx_, q, r); });
  s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& q, httplib::Response& r) { HandleModel(ctx_, q, r); });
  s.Post("/v1/chat/completions",
         [this](const httplib::Request& q, httplib::Response& r) { HandleChatCompletions(ctx_, q, r); });
  s.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { HandleCompletions(ctx_, q, r); });
  s.Post("/v1/messages", [this](const httplib::Request& q, httplib::Response& r) { HandleMessages(ctx_, q, r); });
  s.Post("/v1/messages/count_tokens",
         [this](const httplib::Request& q, httplib::Response& r) { HandleCountTokens(ctx_, q, r); });
}

StatusOr<int> HttpServer::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) return IoError("[server] cannot bind " + options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    return IoError("[server] cannot bind " + options_.host + ":" + std::to_string(port) +
                   " (in use, or not an address of this machine)");
  }
  return port;
}

void HttpServer::Serve() { http_->listen_after_bind(); }

void HttpServer::Stop() { http_->stop(); }

}  // namespace g4::server
